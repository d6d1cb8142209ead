#!/usr/bin/env bash
# Builds arctic-inference's suffix tree alone, for the acceptance benchmark (launch/bench/peers/bench-acceptance.sh), into
# ${LOOKAHEAD_DEPS:-~/.cache/lookahead}/arctic-inference-0.3.0 (never committed). Prints the directory to put on
# PYTHONPATH and the python to run it with.
#
# Why not `pip install arctic-inference==0.3.0`: there is no wheel for this Python (3.11) and building the sdist
# builds all of it (CUDA ops against torch). Only csrc/suffix_decoding/ (a CMake project with nanobind bindings)
# and arctic_inference/suffix_decoding/ (cache.py, simulator.py) are needed. Steps: a small venv (setuptools,
# wheel, nanobind, pandas, tqdm; the torch venv's site-packages on its path because the sdist's setup.py imports
# torch just to produce metadata, and simulator.py imports transformers), `pip download` of the pinned sdist,
# then CMake on csrc/suffix_decoding and the module _C copied next to cache.py.
set -euo pipefail
LA_NAME=build-arctic
. "$(dirname "${BASH_SOURCE[0]}")/../../lib.sh"
VER=$(la_pin arctic-inference | cut -d= -f3)
D=$DEPS/arctic-inference-$VER
PY=$DEPS/torch-$TORCH_VERSION/bin/python
TORCH_SITE=$("$PY" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])" 2>/dev/null || true)
if [ -f "$D/ok" ]; then echo "$D/src $D/venv/bin/python"; exit 0; fi
[ -x "$PY" ] || { echo "build-arctic.sh: $PY missing (run launch/setup.sh first)" >&2; exit 1; }
mkdir -p "$D"
log=$D/build.log
: >"$log"
step() { echo "[arctic] $*" >&2; }
step "venv $D/venv"
[ -x "$D/venv/bin/python" ] || "$PY" -m venv "$D/venv" >>"$log" 2>&1
echo "$TORCH_SITE" >"$D/venv/lib/python3.11/site-packages/zz_torch_venv.pth"
"$D/venv/bin/pip" install -q $(la_pin setuptools wheel nanobind pandas tqdm) \
  >>"$log" 2>&1 || { tail -20 "$log" >&2; exit 1; }
step "sdist arctic-inference==$VER"
[ -f "$D/arctic_inference-$VER.tar.gz" ] ||
  "$D/venv/bin/pip" download "arctic-inference==$VER" --no-deps --no-binary :all: --no-build-isolation -d "$D" \
    >>"$log" 2>&1 || { tail -20 "$log" >&2; exit 1; }
rm -rf "$D/src" "$D/build"
mkdir -p "$D/src"
tar xzf "$D/arctic_inference-$VER.tar.gz" -C "$D/src" --strip-components=1
step "cmake csrc/suffix_decoding"
cmake -S "$D/src/csrc/suffix_decoding" -B "$D/build" -DCMAKE_BUILD_TYPE=Release \
  -DPython_EXECUTABLE="$D/venv/bin/python" >>"$log" 2>&1 || { tail -20 "$log" >&2; exit 1; }
cmake --build "$D/build" -j2 >>"$log" 2>&1 || { tail -20 "$log" >&2; exit 1; }
cp "$D"/build/_C*.so "$D/src/arctic_inference/suffix_decoding/"
PYTHONPATH="$D/src" "$D/venv/bin/python" -c "from arctic_inference.suffix_decoding import SuffixDecodingCache" \
  >>"$log" 2>&1 || { tail -20 "$log" >&2; exit 1; }
touch "$D/ok"
echo "$D/src $D/venv/bin/python"
