#!/usr/bin/env bash
# Acceptance benchmark against arctic-inference's suffix tree and llama.cpp's lookup on the same greedy traces (see
# bench_acceptance.py): mean accepted draft tokens per step at budgets 8/16/32, cold and warm, on HumanEval, MBPP,
# GSM8K, MT-Bench, CNN/DM and Spec-Bench. Builds arctic-inference's suffix tree (launch/bench/peers/build-arctic.sh) and
# llama.cpp with the model's GGUF (launch/bench/peers/build-llamacpp.sh) first, once each.
#
#   launch/bench/peers/bench-acceptance.sh [N_PER_SET (20)] [MAX_NEW (128)]
#   env: MODEL (cached name or directory), THREADS (2), OUT (out/acceptance), LLAMA=0 (no llama.cpp rows),
#        SETS (a comma list of the sets above; default all), BUDGETS (default 8,16,32)
set -euo pipefail
LA_NAME=bench-acceptance
. "$(dirname "${BASH_SOURCE[0]}")/../../lib.sh"
N=${1:-20}
MAX_NEW=${2:-128}
MODEL=${MODEL:-SmolLM2-135M-Instruct}
OUT=${OUT:-$ROOT/out/acceptance}
B=$BUILD
[ -x "$B/lookahead" ] || { echo "bench-acceptance.sh: build/lookahead missing (launch/setup.sh)" >&2; exit 1; }
[ -x "$B/tests/la_replay_acceptance" ] || cmake --build "$B" -j2 --target la_replay_acceptance >&2
read -r ARCTIC_SRC ARCTIC_PY < <("$ROOT/launch/bench/peers/build-arctic.sh")
LLAMA_BIN= LLAMA_GGUF=
if [ "${LLAMA:-1}" != 0 ]; then
  MODEL_DIR=$MODEL; [ -d "$MODEL_DIR" ] || MODEL_DIR=$LA_MODELS/$MODEL
  out=$("$ROOT/launch/bench/peers/build-llamacpp.sh" "$MODEL_DIR") || { echo "bench-acceptance.sh: build-llamacpp.sh failed" >&2; exit 1; }
  LLAMA_BIN=$(sed -n 's/^LLAMA_BIN=//p' <<<"$out")
  LLAMA_GGUF=$(grep -m1 '^GGUF_.*_F32=' <<<"$out" | cut -d= -f2-)
fi
la_machine >&2
LLAMA_BIN="$LLAMA_BIN" LLAMA_GGUF="$LLAMA_GGUF" PYTHONPATH="$ARCTIC_SRC" "$ARCTIC_PY" "$ROOT/launch/bench/peers/bench_acceptance.py" "$B/lookahead" "$B/tests/la_replay_acceptance" \
  "$MODEL" "$SHARED" "$OUT" "$N" "$MAX_NEW" "${THREADS:-2}"
