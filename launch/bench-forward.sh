#!/usr/bin/env bash
# What a step of T tokens costs: `lookahead bench-forward --kernels both` (the default forward and the ATen
# reference on the same weights) RUNS times, the table of every run, and a PNG of the fastest time per T relative
# to T = 1 (the fastest is the least disturbed on a shared machine).
#   launch/bench-forward.sh                                       # SmolLM2-135M-Instruct, CPU, one thread
#   MODEL=../shared/models/stories260K CONTEXT=128 launch/bench-forward.sh
# Env: MODEL (SmolLM2-135M-Instruct), TOKENS (1,2,4,8,16,32,64), CONTEXT (256), RUNS (3), THREADS (1),
#      OUT (build/): writes OUT/bench-forward.txt and OUT/step-cost.png. Extra arguments go to bench-forward.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=${LOOKAHEAD_BIN:-$ROOT/build/lookahead}
OUT=${OUT:-$ROOT/build}
MODEL=${MODEL:-SmolLM2-135M-Instruct}
mkdir -p "$OUT"
{
  echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //') ($(nproc) cores), load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%F)"
  for r in $(seq "${RUNS:-3}"); do
    "$BIN" bench-forward --model "$MODEL" --threads "${THREADS:-1}" --kernels both --tokens "${TOKENS:-1,2,4,8,16,32,64}" \
      --context "${CONTEXT:-256}" "$@"
  done
} | tee "$OUT/bench-forward.txt"
PY=$(cat "$ROOT/build/.venv-path" 2>/dev/null || echo "${LOOKAHEAD_DEPS:-$HOME/.cache/lookahead}/torch-2.11.0")/bin/python
"$PY" "$ROOT/launch/plot.py" forward "$OUT/bench-forward.txt" "$OUT/step-cost.png"
