#!/usr/bin/env bash
# launch/device/device-bundle.sh packs this build's CUDA binaries with their non-torch libraries, and every bundled binary
# resolves all its libraries (ldd shows no "not found", the CUDA driver aside) with only the loader path run.sh
# sets: the bundle plus the local torch wheel's lib/ and nvidia/*/lib, with nothing taken from this machine's
# system folders but the C library (a GPU machine lacks them). Negative control: a bundle missing one of
# its libraries fails the check. (The real bundle is built for sm_90a by `launch/device/device-bundle.sh` without
# arguments; this test packs the CI build to test the packing, not the architecture.)
# labels: cli
# timeout: 300
set -u
BUILD=$1; SRC=$2; SHARED=$3
skip() { echo "SKIP: $*"; exit 77; }
[ -x "$BUILD/tests/test_kernels" ] && [ -x "$BUILD/bench_kernels" ] || skip "not a CUDA build (no test_kernels/bench_kernels)"
[ -x "$BUILD/tests/test_model" ] && [ -x "$BUILD/lookahead" ] || skip "lookahead/test_model not built"
command -v ldd >/dev/null || skip "no ldd"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
fails=0; n=0
check() { n=$((n+1)); if eval "$2"; then echo "ok: $1"; else echo "FAIL: $1"; fails=$((fails+1)); fi; }

LOOKAHEAD_SHARED_DIR=$SHARED bash "$SRC/launch/device/device-bundle.sh" --from-build "$BUILD" --out "$T/b" >"$T/log" 2>&1; rc=$?
sed 's/^/    /' "$T/log"
check "bundle packed and every library resolves (rc=$rc)" "[ $rc -eq 0 ]"
check "run.sh and the binaries are there" "[ -x '$T/b/run.sh' ] && [ -x '$T/b/bin/lookahead' ] && [ -x '$T/b/bin/test_kernels' ]"
check "boost program_options and sentencepiece are bundled" \
  "ls '$T/b/lib' | grep -q boost_program_options && ls '$T/b/lib' | grep -q sentencepiece"
check "the shared models are bundled and run.sh points LA_SHARED at them" \
  "[ -f '$T/b/shared/models/stories260K/config.json' ] && [ -f '$T/b/shared/datasets/tinystories/prompts.jsonl' ] \
   && grep -q 'LA_SHARED=\"\${LA_SHARED:-\$HERE/shared}\"' '$T/b/run.sh'"
check "the archive to carry unpacks to the same bundle (run.sh, the binaries, the shared models)" \
  "mkdir -p '$T/u' && tar -xzf '$T/b.tar.gz' -C '$T/u' && [ -x '$T/u/b/run.sh' ] && cmp -s '$T/u/b/bin/lookahead' '$T/b/bin/lookahead' \
   && [ -f '$T/u/b/shared/models/stories260K/config.json' ]"
check "no torch or CUDA wheel library is bundled" "! ls '$T/b/lib' | grep -E -q '^lib(torch|c10|cudart|nccl|cublas)'"
# The bundled lookahead runs on this CPU through run.sh alone (no build-tree rpath needed: the torch dir comes
# from python3, here the setup venv's).
VENV=$(cat "$BUILD/.venv-path" 2>/dev/null ||
       echo "${LOOKAHEAD_DEPS:-$HOME/.cache/lookahead}/torch-$(sed -n 's/^torch==//p' "$SRC/launch/pins.txt")")
if [ -n "$VENV" ] && [ -x "$VENV/bin/python3" ]; then
  PATH="$VENV/bin:$PATH" "$T/b/run.sh" lookahead score --model random:tiny-mha --ids 1,2,3 >"$T/score" 2>&1
  check "bundled lookahead runs via run.sh ($(head -c 60 "$T/score"))" "grep -q argmax '$T/score'"
fi
# Negative control: drop a bundled library, the check must fail.
victim=$(ls "$T/b/lib" | grep sentencepiece | head -1)
rm -f "$T/b/lib/$victim"
bash "$SRC/launch/device/device-bundle.sh" --check "$T/b" >"$T/log2" 2>&1; rc=$?
check "negative control: without $victim the check fails (rc=$rc)" "[ $rc -ne 0 ] && grep -q '$victim' '$T/log2'"
echo "$((n-fails)) passed, $fails failed"
[ $fails -eq 0 ]
