#!/usr/bin/env bash
# Packs what a bare GPU machine (python3 + torch 2.11, no compiler, no packages, no network) needs to run
# lookahead's CUDA path: the binaries, built HERE for Hopper (sm_90a), and the non-torch shared libraries they
# load, in one folder (default device-bundle/, git-ignored) with a run.sh that points the loader at the folder
# and at the GPU machine's own torch, and the same folder as one archive, OUT.tar.gz, which is what to carry: the
# device tool carries at most 64 MiB per call, so the archive must stay under 63 MiB (checked). The folder itself
# outgrew that (70 MiB from the CI build: ICU's 30 MiB of data for the tokenizer, the kernels' SASS for sm_80 and
# sm_90 in each of the four binaries); gzip takes it to about 27 MiB. There: `tar xzf device-bundle.tar.gz` (or
# `python3 -m tarfile -e device-bundle.tar.gz .`), then `device-bundle/run.sh ...`.
#
#   launch/device/device-bundle.sh                  # configure + build build-sm90a/ (CUDA arch 90a, no MPI), pack, check
#   launch/device/device-bundle.sh --from-build DIR # pack the binaries of an existing build dir (no build), then check
#   launch/device/device-bundle.sh --check DIR      # only check a bundle: ldd of every binary through run.sh's paths
#   options: --out DIR (default device-bundle/)
#
# Binaries: lookahead, tests/test_kernels, tests/test_model (its CudaForward tests), bench_kernels. Built with
# -DLOOKAHEAD_MPI=OFF: one GPU needs no MPI, and Open MPI (plugins, help files, prefix) does not relocate well.
# Libraries: everything `ldd` resolves outside torch's lib/ and nvidia/*/lib wheels and outside the C library
# itself (libc, libm, libdl, librt, libpthread, the loader), i.e. boost_program_options, sentencepiece and its
# protobuf, libstdc++/libgcc_s (the GPU machine's may be older), whatever else is linked. The CUDA driver
# (libcuda.so.1) is never bundled. There: `device-bundle/run.sh lookahead generate ...`, `run.sh test_kernels`.
# Shared models: shared/ carries the small real models and the story prompts the tests load (stories260K, llama2xs,
# datasets/tinystories; about 2.5 MiB) and run.sh points LA_SHARED at it, so the real-weight CUDA tests run there
# instead of skipping (a skip counts as a pass). LA_SHARED set by the caller wins.
set -euo pipefail
LA_NAME=device-bundle
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
OUT=$ROOT/device-bundle
MODE=build
FROM=""
while [ $# -gt 0 ]; do
  case "$1" in
    --from-build) MODE=pack; FROM=$2; shift 2 ;;
    --check) MODE=check; OUT=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    *) echo "device-bundle.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
log() { echo "[device-bundle] $*" >&2; }
LIMIT_MIB=63  # the device tool carries 64 MiB per call (the archive); ~2.4 MiB of the folder are the shared models
BINS=(lookahead tests/test_kernels tests/test_model bench_kernels)

torch_dir() {
  if [ -n "${LOOKAHEAD_TORCH_DIR:-}" ]; then echo "$LOOKAHEAD_TORCH_DIR"; return; fi
  local py
  for py in python3 "$DEPS/torch-$TORCH_VERSION/bin/python"; do
    "$py" -c 'import torch, os; print(os.path.dirname(torch.__file__))' 2>/dev/null && return
  done
  return 1
}

# The loader path run.sh sets, for a torch at $1.
bundle_ld_path() {
  local t=$1 p="$OUT/lib:$t/lib" d
  for d in "$t"/../nvidia/*/lib; do [ -d "$d" ] && p="$p:$(cd "$d" && pwd)"; done
  echo "$p"
}

# The C library family and the driver come from the GPU machine itself; everything else must resolve from the
# bundle or from torch (lib/ and the nvidia wheels), never from this machine's system folders.
BASE_RE='^(libc\.so|libm\.so|libdl\.so|librt\.so|libpthread\.so|ld-linux|libresolv\.so|libutil\.so|libcuda\.so|linux-vdso)'

check_bundle() {
  local t; t=$(torch_dir) || { log "no torch found to check against"; return 1; }
  local ldp; ldp=$(bundle_ld_path "$t")
  local treal; treal=$(cd "$t/.." && pwd)
  local bad=0 f out missing outside
  for f in "$OUT"/bin/*; do
    out=$(env -i LD_LIBRARY_PATH="$ldp" ldd "$f" 2>&1)
    # Only the driver may be missing here (a machine without a GPU has no libcuda.so.1).
    missing=$(echo "$out" | grep "not found" | grep -v "libcuda.so.1" || true)
    outside=$(echo "$out" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | grep -v -E "$BASE_RE" | while read -r n p; do
      r=$(readlink -f "$p"); case "$r" in "$(readlink -f "$OUT")"/*|"$treal"/*) ;; *) echo "$n => $p" ;; esac; done)
    if [ -n "$missing" ] || [ -n "$outside" ]; then
      log "FAIL: $(basename "$f"): libraries not found, or found outside the bundle and torch:"
      echo "$missing$outside" | sed 's/^/    /' >&2; bad=1
    else
      log "ok: $(basename "$f"): every library resolves from the bundle ($(echo "$out" | grep -c "=> $OUT/lib")), torch or the C library"
    fi
  done
  local mib; mib=$(du -sm "$OUT" | cut -f1)
  local arc="$OUT.tar.gz"
  if [ -f "$arc" ]; then
    local amib=$(( $(stat -c %s "$arc") / 1048576 ))
    log "folder ${mib} MiB, carried as $arc: ${amib} MiB"
    mib=$amib
  fi
  if [ "$mib" -ge "$LIMIT_MIB" ]; then log "FAIL: bundle is ${mib} MiB (limit ${LIMIT_MIB})"; bad=1; else log "ok: ${mib} MiB"; fi
  return $bad
}

if [ "$MODE" = check ]; then check_bundle; exit $?; fi

TORCH_DIR=$(torch_dir) || { log "no torch 2.11 (run launch/setup.sh first)"; exit 1; }
if [ "$MODE" = build ]; then
  FROM=${LOOKAHEAD_BUNDLE_BUILD:-$ROOT/build-sm90a}
  if [ ! -f "$FROM/CMakeCache.txt" ]; then
    log "configuring $FROM (CUDA arch 90a, LOOKAHEAD_MPI=OFF)"
    cmake -S "$ROOT" -B "$FROM" -DCMAKE_BUILD_TYPE=Release -DLOOKAHEAD_TORCH_DIR="$TORCH_DIR" -DLOOKAHEAD_CUDA=ON \
      -DLOOKAHEAD_MPI=OFF -DCMAKE_CUDA_ARCHITECTURES=90a >"$ROOT/build-sm90a.configure.log" 2>&1 \
      || { tail -20 "$ROOT/build-sm90a.configure.log" >&2; exit 1; }
  fi
  log "building $FROM (${BINS[*]})"
  cmake --build "$FROM" -j"$(getconf _NPROCESSORS_ONLN)" --target lookahead test_kernels test_model bench_kernels \
    >"$FROM/bundle-build.log" 2>&1 || { grep -E -A5 "error|Error" "$FROM/bundle-build.log" | head -60 >&2; exit 1; }
fi

rm -rf "$OUT"
mkdir -p "$OUT/bin" "$OUT/lib"
for b in "${BINS[@]}"; do
  [ -x "$FROM/$b" ] || { log "missing $FROM/$b"; exit 1; }
  cp "$FROM/$b" "$OUT/bin/"
  strip --strip-unneeded "$OUT/bin/$(basename "$b")" 2>/dev/null || true
done
# Non-torch libraries, from ldd of every binary (resolved here with the build's own rpath).
torch_real=$(cd "$TORCH_DIR/.." && pwd)
for b in "${BINS[@]}"; do ldd "$FROM/$b"; done | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | sort -u | while read -r name path; do
  real=$(readlink -f "$path")
  case "$real" in "$torch_real"/*) continue ;; esac
  if echo "$name" | grep -q -E "$BASE_RE"; then continue; fi
  case "$name" in
    libcudart.so.*|libnccl.so.*|libcublas*|libnvrtc*|libnvJitLink*|libcupti*) continue ;;  # torch's nvidia wheels
  esac
  cp -L "$path" "$OUT/lib/$name"
done
# The shared models the tests read (tests/model/common.h: LA_SHARED/models/..., LA_SHARED/datasets/tinystories).
SHARED_SRC=${LOOKAHEAD_SHARED_DIR:-$ROOT/../shared}
for m in models/stories260K models/llama2xs datasets/tinystories; do
  [ -d "$SHARED_SRC/$m" ] || { log "missing $SHARED_SRC/$m (the shared models; set LOOKAHEAD_SHARED_DIR)"; exit 1; }
  mkdir -p "$OUT/shared/$(dirname "$m")"
  cp -rL "$SHARED_SRC/$m" "$OUT/shared/$m"
done
cat >"$OUT/run.sh" <<'RUN'
#!/usr/bin/env bash
# Runs a bundled binary with the bundle's libraries and this machine's torch (python3 -c 'import torch').
#   run.sh lookahead generate --model random:tinyllama-1.1b --device cuda ...   |   run.sh test_kernels
#   run.sh --env   (prints the LD_LIBRARY_PATH export)
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TORCH=$(python3 -c 'import torch, os; print(os.path.dirname(torch.__file__))') || { echo "run.sh: python3 cannot import torch" >&2; exit 1; }
V=$(python3 -c 'import torch; print(torch.__version__)')
case "$V" in 2.11*) ;; *) echo "run.sh: warning: built against torch 2.11, this machine has $V" >&2 ;; esac
P="$HERE/lib:$TORCH/lib"
for d in "$TORCH"/../nvidia/*/lib; do [ -d "$d" ] && P="$P:$(cd "$d" && pwd)"; done
export LD_LIBRARY_PATH="$P${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export LA_SHARED="${LA_SHARED:-$HERE/shared}"  # the bundled models: real-weight tests run instead of skipping
if [ "${1:-}" = "--env" ]; then echo "export LD_LIBRARY_PATH='$LD_LIBRARY_PATH'"; exit 0; fi
[ $# -ge 1 ] || { echo "usage: run.sh BINARY [args...]  (binaries: $(ls "$HERE/bin" | tr '\n' ' '))" >&2; exit 2; }
b=$1; shift
if [ -x "$HERE/bin/$b" ]; then exec "$HERE/bin/$b" "$@"; fi
exec "$b" "$@"
RUN
chmod +x "$OUT/run.sh"
git -C "$ROOT" rev-parse HEAD >"$OUT/COMMIT" 2>/dev/null || true
log "packed $(ls "$OUT/bin" | wc -l) binaries and $(ls "$OUT/lib" | wc -l) libraries into $OUT: $(ls "$OUT/lib" | tr '\n' ' ')"
# The archive to carry (the folder is also left in place for --check and local use).
tar -C "$(dirname "$OUT")" -czf "$OUT.tar.gz" "$(basename "$OUT")"
check_bundle
