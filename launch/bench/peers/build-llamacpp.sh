#!/usr/bin/env bash
# Builds the peer llama.cpp ONCE, CPU only, from the source vendored in the PyPI sdist llama-cpp-python==0.3.36
# (llama.cpp ggml-org@0c1e57098), into ${LOOKAHEAD_DEPS:-~/.cache/lookahead}/llama.cpp-0.3.36/ (never into this
# repository), and converts a Hugging Face model directory to F32 and BF16 GGUF with llama.cpp's own
# convert_hf_to_gguf.py (its vendored gguf-py). launch/bench/peers/bench-peers.sh calls it; a second run finds everything and
# does nothing.
#   launch/bench/peers/build-llamacpp.sh                 # default model: $DEPS/models/SmolLM2-135M-Instruct
#   launch/bench/peers/build-llamacpp.sh MODEL_DIR ...   # convert these model directories
# Prints, as its last lines, `LLAMA_BIN=<dir with the tools>` and `GGUF_<MODEL>_<F32|BF16>=<path>` for the caller.
# Env: LOOKAHEAD_DEPS, PY (python with torch+transformers: the project's torch venv), JOBS (build jobs, 2).
# Why a script and not a submodule: the peer is a benchmark reference only; the project ships none of its code.
set -euo pipefail
LA_NAME=build-llamacpp
. "$(dirname "${BASH_SOURCE[0]}")/../../lib.sh"
VER=$(la_pin llama-cpp-python | cut -d= -f3)
PY=${PY:-$VENV/bin/python}
JOBS=${JOBS:-2}
TOP=$DEPS/llama.cpp-$VER
SRC=$TOP/src          # the vendored llama.cpp tree (also holds convert_hf_to_gguf.py and gguf-py)
BLD=$TOP/build
BIN=$TOP/bin          # only the tools the benchmark runs
TOOLS=(llama-bench llama-batched-bench llama-completion llama-simple llama-lookup llama-lookahead llama-tokenize)

[ -x "$PY" ] || die "no python at $PY (run launch/setup.sh first, or set PY)"
mkdir -p "$TOP"

# 1. Source: the sdist's vendor/llama.cpp, checked against the pinned sdist hash (lib.sh: la_llamacpp_source).
got_src=$(la_llamacpp_source "$PY") || exit 1   # its error is already printed
[ "$got_src" = "$SRC" ] || die "la_llamacpp_source unpacked $got_src, not $SRC"

# 2. Build: CPU only (no CUDA/Metal/Vulkan/BLAS), native ISA, static, no server/tests/network code.
have_all() { for t in "${TOOLS[@]}"; do [ -x "$BIN/$t" ] || return 1; done; }
if ! have_all; then
  log "configuring and building ${TOOLS[*]} in $BLD (CPU only, GGML_NATIVE, $JOBS jobs; several minutes, once)"
  cmake -S "$SRC" -B "$BLD" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
    -DGGML_NATIVE=ON -DGGML_CPU=ON -DGGML_CUDA=OFF -DGGML_METAL=OFF -DGGML_VULKAN=OFF -DGGML_BLAS=OFF \
    -DGGML_OPENMP=ON -DGGML_RPC=OFF -DGGML_BACKEND_DL=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_UI=OFF \
    -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_NUMBER=0 -DLLAMA_BUILD_COMMIT="pypi-llama-cpp-python-$VER" \
    $(command -v ccache >/dev/null && echo -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache) \
    >"$TOP/configure.log" 2>&1 || die "cmake configure failed: see $TOP/configure.log"
  cmake --build "$BLD" -j"$JOBS" --target "${TOOLS[@]}" >"$TOP/build.log" 2>&1 \
    || die "build failed: see $TOP/build.log"
  mkdir -p "$BIN"
  for t in "${TOOLS[@]}"; do install -m755 "$BLD/bin/$t" "$BIN/$t"; done
fi
have_all || die "tools missing in $BIN after the build"

# 3. GGUF: F32 and BF16 of each model directory, with llama.cpp's converter and its vendored gguf-py. The
# converter's other imports (torch, transformers, numpy, safetensors, yaml, tqdm) are the venv's; only a missing one
# is installed, at a version llama.cpp's requirements allow. sentencepiece is needed even for a BPE model: the
# Llama converter tries it first and falls back to tokenizer.json only when tokenizer.model is absent.
need_py() {  # module pip-spec
  "$PY" -c "import $1" 2>/dev/null || { log "installing $2 into $PY"; "$PY" -m pip install --quiet "$2"; }
}
[ $# -gt 0 ] || set -- "$LA_MODELS/SmolLM2-135M-Instruct"
converter_ready=0
for m in "$@"; do
  [ -f "$m/config.json" ] || die "model directory $m has no config.json"
  name=$(basename "${m%/}")
  mkdir -p "$TOP/gguf"
  for t in f32 bf16; do
    out=$TOP/gguf/$name-${t^^}.gguf
    # Redone only when missing or older than the model's weights (a re-converted model directory).
    if [ ! -s "$out" ] || [ -n "$(find "$m" -maxdepth 1 -name '*.safetensors' -newer "$out")" ]; then
      if [ $converter_ready = 0 ]; then
        need_py numpy "$(la_pin numpy)"; need_py yaml "$(la_pin pyyaml)"; need_py tqdm "$(la_pin tqdm)"
        need_py requests "$(la_pin requests)"; need_py safetensors "$(la_pin safetensors)"
        need_py sentencepiece "$(la_pin sentencepiece)"
        converter_ready=1
      fi
      log "converting $m to $out"
      "$PY" "$SRC/convert_hf_to_gguf.py" "$m" --outtype "$t" --outfile "$out.tmp" >"$TOP/convert-$name-$t.log" 2>&1 \
        || { rm -f "$out.tmp"; die "convert_hf_to_gguf.py failed on $m ($t): see $TOP/convert-$name-$t.log"; }
      mv "$out.tmp" "$out"
    fi
    key=$(echo "$name" | tr -c 'A-Za-z0-9\n' '_')
    echo "GGUF_${key}_${t^^}=$out"
  done
done
echo "LLAMA_BIN=$BIN"
