#!/usr/bin/env bash
# Every strategy, fixed (--adaptive off) and adaptive ("+a" rows, --adaptive on), on the shared models and four prompt
# sets (TinyStories, short GSM8K questions, short HumanEval prompts, CNN/DailyMail articles cut to 600 characters),
# in ONE run with interleaved rounds: step compression S, tokens/s, the ratios to plain decoding and to the fixed
# version measured round by round, plan tokens per step, the adaptive runs' plain-step share and chosen budgets.
# Also checks every strategy's ids against plain decoding (lossless column).
#   launch/bench/bench.sh                      # CPU, fp32
#   launch/bench/bench.sh --device cuda        # same on a GPU; add `--forward` for forward cost vs step size
# Env: N_STORIES (20), N_OTHER (10), MAX_NEW (96), ROUNDS (3), MODELS / SETS (comma lists to restrict),
#      OUROBOROS=1 (add the slow Ouroboros rows), BENCH_MODELS="label=path,..." (more models; SmolLM2-135M is added
#      when setup.sh --test-deps has converted it, SMOLLM2=0 leaves it out), STRATEGIES="trie+a,..." (only these rows),
#      METRIC=cpu (default: tokens per CPU-second of the decoding thread, --threads 1; robust on a shared machine)
#      or wall (tokens per wall-clock second; a quiet machine), OUT (build/: bench-strategies.txt; PLOT=1 adds
#      strategies.png).
set -euo pipefail
LA_NAME=bench
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
la_setup
FORWARD=0
ARGS=()
for a in "$@"; do if [ "$a" = --forward ]; then FORWARD=1; else ARGS+=("$a"); fi; done
PY=python3
# The real model, where launch/setup.sh --test-deps has converted it (docs/setup.md); SMOLLM2=0 leaves it out.
SMOL=$LA_MODELS/SmolLM2-135M-Instruct
if [ "${SMOLLM2:-1}" = 1 ] && [ -f "$SMOL/config.json" ]; then
  export BENCH_MODELS="${BENCH_MODELS:+$BENCH_MODELS,}smollm2=$SMOL"
fi
OUT=${OUT:-$ROOT/build}
mkdir -p "$OUT"
python3 "$ROOT/launch/bench/bench_strategies.py" "$SHARED" "${N_STORIES:-20}" "${N_OTHER:-10}" "${MAX_NEW:-96}" "${ARGS[@]}" \
  | tee "$OUT/bench-strategies.txt"
# PLOT=1: the chart of the table (launch/plot.py with the setup venv's python; pinned matplotlib installed on first use)
if [ "${PLOT:-0}" = 1 ]; then
  "$(la_python)" "$ROOT/launch/plot.py" strategies "$OUT/bench-strategies.txt" \
    "$OUT/strategies.png"
fi
if [ $FORWARD = 1 ]; then
  for m in random:tinyllama-1.1b random:llama-2-7b; do
    "$ROOT/build/lookahead" bench-forward --model $m --dtype fp16 "${ARGS[@]}" --tokens 1,2,4,8,16,32,64,128,256 \
      --context 256,1024
  done
fi
