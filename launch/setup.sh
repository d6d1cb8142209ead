#!/usr/bin/env bash
# Installs what a fresh Debian 12 machine lacks and builds lookahead (Release) into build/.
# Idempotent: a second run checks, finds everything, and rebuilds incrementally (seconds).
#
#   launch/setup.sh              # runtime + build dependencies, then build
#   launch/setup.sh --test-deps  # also what the tests need (Slurm, munge, transformers, clang-14 for fuzzing)
#
# libtorch: the PyPI `torch==2.11.0` wheel (CUDA 13 build; its libtorch runs on CPU too) in a venv under
# $LOOKAHEAD_DEPS (default ~/.cache/lookahead). Measured here: ~60 s to install, 4.7 GB. Debian's libtorch-dev is
# 1.13 and CPU-only, so it could not compile the CUDA path. Set LOOKAHEAD_TORCH_DIR to use another libtorch;
# a system python3 that already has torch 2.11 (the GPU machine) is used as is.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DEPS=${LOOKAHEAD_DEPS:-$HOME/.cache/lookahead}
TORCH_VERSION=2.11.0
VENV=$DEPS/torch-$TORCH_VERSION
BUILD=${LOOKAHEAD_BUILD:-$ROOT/build}
TEST_DEPS=0
for a in "$@"; do
  case "$a" in
    --test-deps) TEST_DEPS=1 ;;
    *) echo "setup.sh: unknown argument '$a'" >&2; exit 2 ;;
  esac
done
log() { echo "[setup] $*" >&2; }

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
PKGS=(build-essential cmake pkg-config git python3 python3-venv libopenmpi-dev openmpi-bin
      libboost-program-options-dev nlohmann-json3-dev libsentencepiece-dev libgtest-dev
      libpcre2-dev libicu-dev)
if [ $TEST_DEPS = 1 ]; then PKGS+=(slurm-wlm munge clang-14 libclang-rt-14-dev); fi  # clang: libFuzzer (tests/fuzz)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  log "apt-get install ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# libtorch
torch_dir_of() { "$1" -c "import torch,os; assert torch.__version__.startswith('${TORCH_VERSION%.*}'); print(os.path.dirname(torch.__file__))" 2>/dev/null; }
if [ -n "${LOOKAHEAD_TORCH_DIR:-}" ]; then
  TORCH_DIR=$LOOKAHEAD_TORCH_DIR
elif TORCH_DIR=$(torch_dir_of python3); then
  log "using the system python's torch at $TORCH_DIR"
else
  if ! TORCH_DIR=$(torch_dir_of "$VENV/bin/python"); then
    log "installing torch==$TORCH_VERSION from PyPI into $VENV (about a minute)"
    mkdir -p "$DEPS"
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q --disable-pip-version-check "torch==$TORCH_VERSION" numpy
    TORCH_DIR=$(torch_dir_of "$VENV/bin/python")
  fi
fi
if [ $TEST_DEPS = 1 ] && [ -x "$VENV/bin/python" ]; then
  "$VENV/bin/python" -c "import transformers, safetensors, tokenizers" 2>/dev/null || {
    log "installing transformers and tokenizers into $VENV"
    "$VENV/bin/pip" install -q --disable-pip-version-check "transformers>=4.45" safetensors tokenizers
  }
fi

# build
if [ ! -f "$BUILD/CMakeCache.txt" ] || ! grep -q "LOOKAHEAD_TORCH_DIR:PATH=$TORCH_DIR\$" "$BUILD/CMakeCache.txt"; then
  log "configuring $BUILD"
  cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DLOOKAHEAD_TORCH_DIR="$TORCH_DIR" ${LOOKAHEAD_CMAKE_ARGS:-} >/dev/null
fi
log "building ($BUILD)"
if ! cmake --build "$BUILD" -j"$(getconf _NPROCESSORS_ONLN)" >"$BUILD/build.log" 2>&1; then
  grep -E -A5 "error|Error" "$BUILD/build.log" | head -60 >&2
  echo "setup.sh: build failed; full log in $BUILD/build.log" >&2
  exit 1
fi
echo "$VENV" > "$BUILD/.venv-path"
log "ready: $BUILD/lookahead"
