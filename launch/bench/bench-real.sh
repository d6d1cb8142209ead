#!/usr/bin/env bash
# Real-task benchmark: SmolLM2-135M-Instruct (dequantized Q4_1 weights, fp32, CPU; the directory launch/setup.sh
# --test-deps converts, as transformers runs it too) on MT-Bench first turns (chat),
# HumanEval prompts (raw code), GSM8K questions (chat) and CNN/DailyMail articles (chat, "Summarize:"), every strategy
# (defaults and one small setting each, fixed, and the main ones adaptive: rows "+a"), and IN THE SAME RUN Hugging Face transformers on the same prompt ids and
# weights (greedy generate() and prompt lookup with prompt_lookup_num_tokens=10): S, accepted tokens per step,
# tokens/s, x AR, and whether the ids equal the engine's plain decoding. Body: launch/bench/bench_real.py.
#   launch/bench/bench-real.sh                  # 20 prompts per set, 128 new tokens
#   N=5 launch/bench/bench-real.sh --threads 2  # fewer prompts; extra flags go to every `lookahead generate`
# Env: N (prompts per set, 20), MAX_NEW (128), MODEL (SmolLM2-135M-Instruct), STRATEGIES="trie,trie+a,..." and
# SETS="gsm8k,cnn-dm" (only those rows / sets; plain decoding and transformers always run), THREADS (CPU threads for both engines;
# 0: libtorch's default. On a machine shared with other jobs use 1: two threads then spin, measured 8x slower),
# OUT (build/: bench-real.txt, and real-tasks.png with PLOT=1).
set -euo pipefail
LA_NAME=bench-real
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
la_setup
MODEL=${MODEL:-SmolLM2-135M-Instruct}
[ -d "$MODEL" ] || MODEL=$LA_MODELS/$MODEL
PY=$(la_python)
la_machine
export THREADS=${THREADS:-0}
OUT=${OUT:-$ROOT/build}
mkdir -p "$OUT"
"$PY" "$ROOT/launch/bench/bench_real.py" "$MODEL" "$SHARED" "${N:-20}" "${MAX_NEW:-128}" "$@" | tee "$OUT/bench-real.txt"
# PLOT=1: the chart of the table (launch/plot.py; installs its pinned matplotlib into the venv on first use)
if [ "${PLOT:-0}" = 1 ]; then "$PY" "$ROOT/launch/plot.py" real "$OUT/bench-real.txt" "$OUT/real-tasks.png"; fi
