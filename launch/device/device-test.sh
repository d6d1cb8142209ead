#!/usr/bin/env bash
# The build-from-source fallback of launch/device/device-bundle.sh (prefer the bundle: it needs no build there).
# Builds lookahead with CUDA on the GPU machine, runs the CUDA kernel tests (ctest label "kernels") and the
# CUDA forward tests, then the GPU benchmarks (launch/device/gpu-bench.sh k b). Logs go to $OUT (the device runner's output folder) or to build/device-out.
#
#   launch/device/device-test.sh [all|build|test|bench]...   # default: all (= build test bench)
#
# Stages can be run in separate calls (each device command is time-limited): the build dir is reused.
# Environment: LOOKAHEAD_BUILD (default build/), LA_DEB_PREFIX (default /tmp/prefix), CMAKE_CUDA_ARCHITECTURES
# (default 90), LOOKAHEAD_CMAKE_ARGS (extra configure arguments), CTEST_ARGS (extra ctest arguments).
#
# Missing Debian packages. The GPU machine has PyTorch 2.11 system-wide but may lack the -dev packages the
# build needs and has no network. They are carried in the repo folder .debs/ (git-ignored; pass it as a carried
# path) and unpacked with `dpkg -x` (never installed into /) into $LA_DEB_PREFIX; only packages that dpkg does
# not already list as installed are unpacked. CMake, pkg-config and the loader are pointed there through
# CMAKE_PREFIX_PATH, PKG_CONFIG_PATH and LD_LIBRARY_PATH (and FindMPI through explicit hints).
# Fill .debs once, on a networked machine of the same distribution (Debian 12 "bookworm"), with:
#
#   launch/device/device-test.sh --fill-debs
#
# which runs, in .debs/:
#   apt-get download $DEV $(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts \
#       --no-breaks --no-replaces --no-enhances $RT | grep '^[a-z0-9]' | sort -u | grep -vE "$BASE")
# with DEV, RT and BASE as defined below (about 40 MB: the -dev packages, their runtime libraries and
# dependencies, without the toolchain and base system).
set -uo pipefail
LA_NAME=device-test
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
BUILD=${LOOKAHEAD_BUILD:-$ROOT/build}
PREFIX=${LA_DEB_PREFIX:-/tmp/prefix}
LOGS=${OUT:-$BUILD/device-out}
ARCH_TRIPLET=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
[ -n "$ARCH_TRIPLET" ] || ARCH_TRIPLET=x86_64-linux-gnu

DEV="libboost-program-options-dev libboost-program-options1.74-dev libboost1.74-dev libopenmpi-dev
     nlohmann-json3-dev libsentencepiece-dev libgtest-dev pkgconf pkgconf-bin libpkgconf3"
RT="libboost-program-options1.74.0 libopenmpi3 openmpi-bin openmpi-common libsentencepiece0"
BASE='^(gcc|cpp|g\+\+|libgcc|libstdc\+\+|libc6|libc-|libc-bin|perl|libperl|debconf|dpkg|tar|python3|login|passwd|base-|bash|coreutils|util-linux|init-system|systemd|libsystemd|lib(pam|selinux|semanage|sepol|audit|crypt|acl|attr)[^ ]*)'

log() { echo "[device-test] $*" >&2; }

if [ "${1:-}" = "--fill-debs" ]; then
  mkdir -p "$ROOT/.debs" && cd "$ROOT/.debs" || exit 1
  # shellcheck disable=SC2086
  deps=$(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks --no-replaces \
         --no-enhances $RT | grep '^[a-z0-9]' | sort -u | grep -vE "$BASE")
  # shellcheck disable=SC2086
  apt-get download $DEV $deps
  log "filled $ROOT/.debs: $(ls ./*.deb | wc -l) packages, $(du -sh . | cut -f1)"
  exit 0
fi

STAGES=("$@")
[ ${#STAGES[@]} -eq 0 ] && STAGES=(all)
want() {
  local s
  for s in "${STAGES[@]}"; do
    if [ "$s" = all ] || [ "$s" = "$1" ]; then return 0; fi
  done
  return 1
}
mkdir -p "$LOGS"
SUMMARY=$LOGS/summary.txt
: >"$SUMMARY"
STATUS=0
record() {  # record NAME RC
  echo "$1: $([ "$2" = 0 ] && echo ok || echo "FAILED (rc $2)")" | tee -a "$SUMMARY" >&2
  [ "$2" = 0 ] || STATUS=1
}

# ---------------------------------------------------------------------------------------------------------------
# Environment: GPU, torch, nvcc, unpacked .debs.
nvidia-smi >"$LOGS/nvidia-smi.txt" 2>&1 || log "nvidia-smi failed (see $LOGS/nvidia-smi.txt)"

TORCH_CMAKE=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)' 2>"$LOGS/torch.err") || {
  log "python3 cannot import torch: $(tail -1 "$LOGS/torch.err")"
  exit 1
}
TORCH_DIR=$(cd "$TORCH_CMAKE/../.." && pwd)  # site-packages/torch (holds include/ and lib/)
log "torch: $TORCH_DIR ($(python3 -c 'import torch; print(torch.__version__, "cuda", torch.version.cuda)'))"
[ -f "$TORCH_DIR/lib/libtorch_cuda.so" ] || { log "no libtorch_cuda.so in $TORCH_DIR/lib: a CPU-only torch?"; exit 1; }

if ! command -v nvcc >/dev/null 2>&1; then
  for d in /usr/local/cuda/bin /usr/local/cuda-13*/bin "$TORCH_DIR/../nvidia/cu13/bin"; do
    if [ -x "$d/nvcc" ]; then export PATH="$d:$PATH"; break; fi
  done
fi
command -v nvcc >/dev/null 2>&1 || { log "nvcc not found (need the CUDA 13 toolkit)"; exit 1; }
export CUDACXX=${CUDACXX:-$(command -v nvcc)}
log "nvcc: $CUDACXX ($(nvcc --version | tail -1))"

unpack_deb() {  # unpack_deb FILE DEST (dpkg -x, or ar + tar where dpkg is missing)
  if command -v dpkg-deb >/dev/null 2>&1; then
    dpkg -x "$1" "$2"
  else
    local tmp member
    tmp=$(mktemp -d)
    (cd "$tmp" && ar x "$1") || return 1
    member=$(ls "$tmp"/data.tar.* 2>/dev/null | head -1)
    tar -xf "$member" -C "$2"
    rm -rf "$tmp"
  fi
}

EXTRA_CMAKE=()
if [ -d "$ROOT/.debs" ] && ls "$ROOT"/.debs/*.deb >/dev/null 2>&1; then
  mkdir -p "$PREFIX"
  n=0
  for deb in "$ROOT"/.debs/*.deb; do
    pkg=$(dpkg-deb -f "$deb" Package 2>/dev/null || basename "$deb" | cut -d_ -f1)
    if dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then continue; fi
    stamp="$PREFIX/.unpacked/$(basename "$deb")"
    [ -f "$stamp" ] && continue
    unpack_deb "$deb" "$PREFIX" || { log "cannot unpack $deb"; exit 1; }
    mkdir -p "$PREFIX/.unpacked" && touch "$stamp"
    n=$((n + 1))
  done
  log "unpacked $n new package(s) from .debs into $PREFIX"
  # Absolute symlinks (e.g. lib*.so -> /usr/lib/...) point into the prefix instead.
  while IFS= read -r l; do
    t=$(readlink "$l")
    case "$t" in /*) [ -e "$PREFIX$t" ] && ln -sfn "$PREFIX$t" "$l" ;; esac
  done < <(find "$PREFIX/usr" -type l 2>/dev/null)
  # pkg-config files carry prefix=/usr: relocate them.
  find "$PREFIX/usr" -name '*.pc' -path '*pkgconfig*' 2>/dev/null | while IFS= read -r pc; do
    sed -i -e "s#=/usr\\b#=$PREFIX/usr#g" -e "s#-I/usr/#-I$PREFIX/usr/#g" -e "s#-L/usr/#-L$PREFIX/usr/#g" "$pc"
  done
  export CMAKE_PREFIX_PATH="$PREFIX/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
  export PKG_CONFIG_PATH="$PREFIX/usr/lib/$ARCH_TRIPLET/pkgconfig:$PREFIX/usr/share/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
  export LD_LIBRARY_PATH="$PREFIX/usr/lib/$ARCH_TRIPLET:$PREFIX/usr/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export PATH="$PATH:$PREFIX/usr/bin"
  # Open MPI from the prefix: its wrappers are alternatives symlinks dpkg -x does not create, so hand FindMPI
  # the header and library directly; OPAL_PREFIX relocates mpirun's plugins and help files.
  MPI_LIB="$PREFIX/usr/lib/$ARCH_TRIPLET/libmpi.so.40"
  if ! command -v mpicxx >/dev/null 2>&1 && [ -e "$MPI_LIB" ]; then
    export OPAL_PREFIX="$PREFIX/usr"
    EXTRA_CMAKE+=(-DMPI_SKIP_COMPILER_WRAPPER=ON -DMPI_CXX_SKIP_MPICXX=ON "-DMPI_CXX_LIBRARIES=$MPI_LIB"
                  "-DMPI_CXX_ADDITIONAL_INCLUDE_DIRS=$PREFIX/usr/lib/$ARCH_TRIPLET/openmpi/include")
    [ -x "$PREFIX/usr/bin/orterun" ] && EXTRA_CMAKE+=("-DMPIEXEC_EXECUTABLE=$PREFIX/usr/bin/orterun")
    log "MPI from $PREFIX (OPAL_PREFIX=$OPAL_PREFIX)"
  fi
  EXTRA_CMAKE+=("-DCMAKE_PREFIX_PATH=$PREFIX/usr")
else
  log "no .debs/ folder: using the system's packages only"
fi
# The env a later stage (or a person) needs to run the binaries by hand.
{
  echo "export LD_LIBRARY_PATH='${LD_LIBRARY_PATH:-}'"
  echo "export PATH='$PATH'"
  [ -n "${OPAL_PREFIX:-}" ] && echo "export OPAL_PREFIX='$OPAL_PREFIX'"
} >"$LOGS/env.sh"

# ---------------------------------------------------------------------------------------------------------------
if want build; then
  log "configuring $BUILD"
  # shellcheck disable=SC2086
  cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DLOOKAHEAD_TORCH_DIR="$TORCH_DIR" -DLOOKAHEAD_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES="${CMAKE_CUDA_ARCHITECTURES:-90}" "${EXTRA_CMAKE[@]}" ${LOOKAHEAD_CMAKE_ARGS:-} \
    >"$LOGS/configure.log" 2>&1
  rc=$?
  record configure $rc
  if [ $rc != 0 ]; then
    tail -30 "$LOGS/configure.log" >&2
    exit 1
  fi
  log "building (log: $LOGS/build.log)"
  start=$(date +%s)
  cmake --build "$BUILD" -j"$(getconf _NPROCESSORS_ONLN)" >"$LOGS/build.log" 2>&1
  rc=$?
  echo "build seconds: $(($(date +%s) - start))" >>"$SUMMARY"
  record build $rc
  if [ $rc != 0 ]; then
    grep -E -A5 "error|Error" "$LOGS/build.log" | head -80 >&2
    exit 1
  fi
fi

if want test; then
  [ -f "$BUILD/CMakeCache.txt" ] || { log "no build in $BUILD: run the build stage first"; exit 1; }
  log "kernel tests"
  if [ -x "$BUILD/tests/test_kernels" ]; then
    "$BUILD/tests/test_kernels" --gtest_output="xml:$LOGS/test_kernels.xml" >"$LOGS/test_kernels.log" 2>&1
    rc=$?
    tail -25 "$LOGS/test_kernels.log" >&2
    # On the GPU machine a skipped kernel test means the device was not usable: count it as a failure.
    if grep -q "no CUDA device" "$LOGS/test_kernels.log"; then
      log "kernel tests were skipped: no usable CUDA device"
      rc=1
    fi
    record test_kernels $rc
  else
    record "test_kernels (binary missing)" 1
  fi
  if [ -x "$BUILD/tests/test_model" ]; then
    log "CUDA forward tests (test_model --gtest_filter='*CudaForward*')"
    "$BUILD/tests/test_model" --gtest_filter='*CudaForward*' >"$LOGS/test_cuda_forward.log" 2>&1
    rc=$?
    tail -25 "$LOGS/test_cuda_forward.log" >&2
    record test_cuda_forward $rc
  fi
  log "ctest -L kernels (log: $LOGS/ctest.log)"
  # Only the kernel label: the CPU suites were run in CI, and the device call's minutes are for the GPU.
  # shellcheck disable=SC2086
  (cd "$BUILD" && ctest -L kernels --output-on-failure --output-junit "$LOGS/ctest-junit.xml" ${CTEST_ARGS:-}) \
    >"$LOGS/ctest.log" 2>&1
  rc=$?
  grep -E "tests passed|tests failed|\*\*\*|Failed|Not Run" "$LOGS/ctest.log" | tail -30 >&2
  record ctest $rc
fi

if want bench; then
  log "GPU benchmarks (log: $LOGS/bench.log)"
  OUT=$LOGS LOOKAHEAD_BUILD=$BUILD LA_BUNDLE=/nonexistent bash "$ROOT/launch/device/gpu-bench.sh" k b >"$LOGS/bench.log" 2>&1
  rc=$?
  cat "$LOGS/bench.log"
  record bench $rc
fi

log "summary ($SUMMARY):"
cat "$SUMMARY" >&2
exit $STATUS
