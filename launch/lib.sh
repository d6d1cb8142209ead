# Sourced by the launch/ scripts (not run): the paths and helpers every script repeated. Source it first:
#   . "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"   (from launch/bench/; ../../lib.sh from launch/bench/peers/)
# Sets ROOT (the checkout), DEPS (LOOKAHEAD_DEPS, ~/.cache/lookahead: the venv, models and peer builds, never in
# the checkout), BUILD (LOOKAHEAD_BUILD, build/), SHARED (LOOKAHEAD_SHARED, ../shared: models and datasets),
# LA_MODELS (DEPS/models: the model cache `--model NAME` looks in), TORCH_VERSION (from launch/pins.txt) and VENV
# (the python environment setup.sh used, build/.venv-path). Names not prefixed LA_ are the ones the scripts always
# used; LA_ ones avoid the scripts' environment knobs (bench.sh's MODELS).
# LA_NAME (default: the script's name) prefixes log and error lines.
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DEPS=${LOOKAHEAD_DEPS:-$HOME/.cache/lookahead}
BUILD=${LOOKAHEAD_BUILD:-$ROOT/build}
SHARED=${LOOKAHEAD_SHARED:-$ROOT/../shared}
LA_PINS=$ROOT/launch/pins.txt
LA_NAME=${LA_NAME:-$(basename "$0" .sh)}
LA_MODELS=$DEPS/models   # the demo model's GGUF and the converted model directories (launch/setup.sh)

log() { echo "[$LA_NAME] $*" >&2; }
die() { echo "$LA_NAME: error: $*" >&2; exit 1; }

# la_pin NAME...: the pinned "name==version" (or "name>=...", "name~=...") of each package (launch/pins.txt); fails
# on an unknown name.
la_pin() {
  local n line
  for n in "$@"; do
    line=$(sed -n "s/^\($n[=~>]=[^ #]*\).*/\1/p" "$LA_PINS")
    [ -n "$line" ] || { echo "$LA_NAME: no pin for '$n' in $LA_PINS" >&2; return 1; }
    echo "$line"
  done
}
TORCH_VERSION=$(la_pin torch | cut -d= -f3)
# The venv setup.sh made or chose: build/.venv-path holds it (a GPU machine's system torch gets another one).
VENV=$(cat "$BUILD/.venv-path" 2>/dev/null || echo "$DEPS/torch-$TORCH_VERSION")
# la_python: the setup venv's python (torch, transformers), or a clear error when setup has not run.
la_python() {
  [ -x "$VENV/bin/python" ] || die "no python at $VENV/bin/python (run launch/setup.sh first)"
  echo "$VENV/bin/python"
}
# la_machine: one line naming this machine's CPU, cores and load, for the head of a benchmark table.
la_machine() {
  echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //') ($(nproc) cores), load $(cut -d' ' -f1-3 /proc/loadavg)"
}
# la_peer_env: the engine, model directory, shared datasets and python a peer benchmark runs with, exported for its
# Python body (LOOKAHEAD_BIN, MODEL: SmolLM2's converted directory by default, SHARED, PY), each checked.
la_peer_env() {
  export PY=${PY:-$VENV/bin/python}
  export LOOKAHEAD_BIN=${LOOKAHEAD_BIN:-$BUILD/lookahead}
  export MODEL=${MODEL:-$LA_MODELS/SmolLM2-135M-Instruct}
  export SHARED
  [ -x "$LOOKAHEAD_BIN" ] || die "no engine binary at $LOOKAHEAD_BIN (build it, or set LOOKAHEAD_BIN)"
  [ -f "$MODEL/config.json" ] || die "no model directory at $MODEL (run launch/setup.sh --test-deps, or set MODEL)"
  [ -d "$SHARED/datasets" ] || die "no shared datasets at $SHARED/datasets (set LOOKAHEAD_SHARED)"
  [ -x "$PY" ] || die "no python at $PY (run launch/setup.sh first)"
}
# la_llamacpp_source PY: the llama.cpp tree vendored in the pinned llama-cpp-python sdist (launch/pins.txt), unpacked
# ONCE into $DEPS/llama.cpp-<version>/src (pip download with PY, checked against the sdist's sha256 below); prints
# that path. The peer build (launch/bench/peers/build-llamacpp.sh) compiles it; setup.sh --test-deps copies its
# vocabulary test files (models/ggml-vocab-*) from it. A second call finds the tree and does nothing.
LA_LLAMACPP_SDIST_SHA256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
la_llamacpp_source() {
  local py=$1 ver top src tmp f got
  ver=$(la_pin llama-cpp-python | cut -d= -f3)
  top=$DEPS/llama.cpp-$ver
  src=$top/src
  if [ ! -f "$src/.unpacked" ]; then
    mkdir -p "$top"
    tmp=$(mktemp -d "$top/.dl.XXXXXX")
    log "downloading llama-cpp-python==$ver (sdist) from PyPI"
    if ! "$py" -m pip download --quiet --disable-pip-version-check --no-deps --no-binary :all: \
         "llama-cpp-python==$ver" -d "$tmp" >&2; then
      rm -rf "$tmp"; die "pip download of llama-cpp-python==$ver failed"
    fi
    f="$tmp/llama_cpp_python-$ver.tar.gz"
    [ -f "$f" ] || { rm -rf "$tmp"; die "pip download gave no $f"; }
    got=$(sha256sum "$f" | cut -d' ' -f1)
    [ "$got" = "$LA_LLAMACPP_SDIST_SHA256" ] \
      || { rm -rf "$tmp"; die "sdist $f has sha256 $got, pinned $LA_LLAMACPP_SDIST_SHA256"; }
    tar -xzf "$f" -C "$tmp" "llama_cpp_python-$ver/vendor/llama.cpp" || { rm -rf "$tmp"; die "cannot unpack $f"; }
    rm -rf "$src"
    mv "$tmp/llama_cpp_python-$ver/vendor/llama.cpp" "$src"
    rm -f "$src/.git"   # a submodule pointer to a parent that is not there; cmake would ask git about it
    touch "$src/.unpacked"
    rm -rf "$tmp"
  fi
  echo "$src"
}
# la_setup: runs launch/setup.sh quietly, showing its output only when it fails.
la_setup() { "$ROOT/launch/setup.sh" "$@" >/dev/null 2>&1 || "$ROOT/launch/setup.sh" "$@"; }
# la_positive NAME=VALUE...: each value a whole number >= 1, else a clear error naming it.
la_positive() {
  local kv
  for kv in "$@"; do
    case "${kv#*=}" in ''|*[!0-9]*|0) die "${kv%%=*} must be a positive integer (got '${kv#*=}')" ;; esac
  done
}
