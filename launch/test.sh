#!/usr/bin/env bash
# Runs every test: sets up if needed (with the test dependencies), then
#   1. the libtorch-free suites (bad input, draft structures, partitioner, ...) under AddressSanitizer + UBSan
#      in build-asan/ (CTest label "core");
#   2. the parser fuzz targets (tests/fuzz/run.sh: libFuzzer + ASan/UBSan in build-fuzz/): every seed and
#      regression input, then LOOKAHEAD_FUZZ_TIME seconds (default 15) of fuzzing per target (~3 minutes);
#      LOOKAHEAD_FUZZ_TIME=0 replays the inputs only;
#   3. every CTest test of the Release build in build/ (core, model, cli, mpi, slurm, hf labels; GPU kernel
#      tests skip with a message when no GPU is present).
# Extra arguments go to the second ctest (e.g. `launch/test.sh -L model`, `-R Lossless`).
set -uo pipefail
LA_NAME=test
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"   # ROOT, BUILD, MODELS, ...
cd "$ROOT"
"$ROOT/launch/setup.sh" --test-deps || exit 1
JOBS=$(getconf _NPROCESSORS_ONLN)
# Tests run in parallel (ctest -j); one intra-op thread per test process keeps OpenMP from spinning against
# the other test on the same cores (the test models are tiny).
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} MKL_NUM_THREADS=${MKL_NUM_THREADS:-1}

echo "== sanitizers: ASan + UBSan build of the libtorch-free code (build-asan/)"
ASAN=$ROOT/build-asan
if [ ! -f "$ASAN/CMakeCache.txt" ]; then
  cmake -S "$ROOT" -B "$ASAN" -DLOOKAHEAD_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null || exit 1
fi
cmake --build "$ASAN" -j"$JOBS" >"$ASAN/build.log" 2>&1 || { tail -40 "$ASAN/build.log"; exit 1; }
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
ctest --test-dir "$ASAN" -L core -j"$JOBS" --output-on-failure > "$ASAN/ctest.log" 2>&1
asan_rc=$?
grep -E "tests passed|tests failed|\*\*\*Failed|Failed  " "$ASAN/ctest.log" | tail -20
asan_total=$(sed -n 's/.*tests failed out of \([0-9]*\).*/\1/p' "$ASAN/ctest.log" | tail -1)
asan_failed=$(sed -n 's/.* \([0-9]*\) tests failed out of.*/\1/p' "$ASAN/ctest.log" | tail -1)
unset ASAN_OPTIONS UBSAN_OPTIONS

echo "== fuzzing: the parsers under libFuzzer + ASan/UBSan (build-fuzz/)"
FUZZ_TIME=${LOOKAHEAD_FUZZ_TIME:-15}
if [ "$FUZZ_TIME" = 0 ]; then fuzz_args=(--replay); else fuzz_args=(--time "$FUZZ_TIME"); fi
mkdir -p "$ROOT/build-fuzz"
"$ROOT/tests/fuzz/run.sh" "${fuzz_args[@]}" > "$ROOT/build-fuzz/run.log" 2>&1
fuzz_rc=$?
grep -E "^FAIL|^fuzz:|run.sh:" "$ROOT/build-fuzz/run.log" | tail -20
[ $fuzz_rc -eq 0 ] || echo "fuzzing failed (full log: build-fuzz/run.log)"

echo "== all tests (build/)"
ctest --test-dir "$ROOT/build" -j"$JOBS" --output-on-failure --timeout 1800 "$@" 2>&1 | tee "$ROOT/build/ctest.log"
main_rc=${PIPESTATUS[0]}
main_total=$(sed -n 's/.*tests failed out of \([0-9]*\).*/\1/p' "$ROOT/build/ctest.log" | tail -1)
main_failed=$(sed -n 's/.* \([0-9]*\) tests failed out of.*/\1/p' "$ROOT/build/ctest.log" | tail -1)
skipped=$(grep -c '\*\*\*Skipped' "$ROOT/build/ctest.log" || true)
total=$(( ${asan_total:-0} + ${main_total:-0} ))
failed=$(( ${asan_failed:-0} + ${main_failed:-0} ))
echo "sanitizer build: ${asan_total:-0} tests, ${asan_failed:-?} failed; fuzz: $(grep '^fuzz:' "$ROOT/build-fuzz/run.log" | tail -1 | sed 's/^fuzz: //'); release build: ${main_total:-0} tests, ${main_failed:-?} failed"
echo "$((total - failed - ${skipped:-0})) passed, $failed failed, ${skipped:-0} skipped"
[ $asan_rc -eq 0 ] && [ $fuzz_rc -eq 0 ] && [ $main_rc -eq 0 ]
