#!/usr/bin/env bash
# Acceptance benchmark against arctic-inference's suffix tree on the same greedy traces (see bench_acceptance.py):
# mean accepted draft tokens per step at budgets 8/16/32, cold and warm, on HumanEval, MBPP, GSM8K, MT-Bench, CNN/DM
# and Spec-Bench. Builds arctic-inference's suffix tree first (launch/build-arctic.sh, once).
#
#   launch/bench-acceptance.sh [N_PER_SET (20)] [MAX_NEW (128)]     env: MODEL, THREADS (2), OUT (out/acceptance)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
N=${1:-20}
MAX_NEW=${2:-128}
MODEL=${MODEL:-SmolLM2-135M-Instruct}
OUT=${OUT:-$ROOT/out/acceptance}
B=$ROOT/build
[ -x "$B/lookahead" ] || { echo "bench-acceptance.sh: build/lookahead missing (launch/setup.sh)" >&2; exit 1; }
[ -x "$B/tests/la_replay_acceptance" ] || cmake --build "$B" -j2 --target la_replay_acceptance >&2
read -r ARCTIC_SRC ARCTIC_PY < <("$ROOT/launch/build-arctic.sh")
PYTHONPATH="$ARCTIC_SRC" "$ARCTIC_PY" "$ROOT/launch/bench_acceptance.py" "$B/lookahead" "$B/tests/la_replay_acceptance" \
  "$MODEL" "$ROOT/../shared" "$OUT" "$N" "$MAX_NEW" "${THREADS:-2}"
