#!/usr/bin/env bash
# The main job: sets up if needed (the first run also converts SmolLM2-135M-Instruct, a few minutes), then
#  1. chats with SmolLM2-135M-Instruct (dequantized Q4_1 weights in fp32, CPU, greedy): a few questions and a code
#     prompt, the answers streamed as they are decoded with prompt lookup (its drafts are the cheapest, 2-8 tokens
#     per step, and in launch/bench-real.sh it was at or above plain decoding on code and summaries), each
#     followed by its tokens/s and step compression;
#  2. prints a strategy table for the same model on those prompts: tokens/s, S (tokens per forward), x AR, and
#     whether the ids equal plain decoding's (lossless);
#  3. the same table for the 260K-parameter TinyStories model in ../shared (skipped when ../shared is absent).
# Env: MODEL (SmolLM2-135M-Instruct), STRATEGY (prompt-lookup), N (new tokens, 96), THREADS (0: libtorch default),
# LOOKAHEAD_BIN (a built binary: skips setup; tests/scripts/test_demo.sh uses it).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [ -z "${LOOKAHEAD_BIN:-}" ]; then "$ROOT/launch/setup.sh"; fi
BIN=${LOOKAHEAD_BIN:-$ROOT/build/lookahead}
SHARED=${LOOKAHEAD_SHARED:-$ROOT/../shared}
MODEL=${MODEL:-SmolLM2-135M-Instruct}
STRATEGY=${STRATEGY:-prompt-lookup}
N=${N:-96}
THREADS=${THREADS:-0}
OUT=$(mktemp -d); trap 'rm -rf "$OUT"' EXIT
G=(generate --model "$MODEL" --threads "$THREADS")

echo
echo "== 1. Chat with $MODEL (greedy, fp32, CPU, --strategy $STRATEGY)"
for q in "What are three tips for staying focused while studying?" \
         "Write a Python function that checks whether a string is a palindrome."; do
  echo
  printf '> '
  "$BIN" "${G[@]}" --chat --prompt "$q" --max-new-tokens "$N" --strategy "$STRATEGY" 2> "$OUT/err" || {
    cat "$OUT/err" >&2; exit 1; }
  grep -o "[0-9]* tokens in .*" "$OUT/err" | sed 's/^/   [/; s/$/]/'
done

echo
echo "== 2. Every strategy on 4 prompts ($MODEL, $N new tokens; lossless = ids equal plain decoding's)"
python3 - "$OUT/prompts.jsonl" <<'PY'
import json, sys
chats = ["What are three tips for staying focused while studying?",
         "Write a Python function that checks whether a string is a palindrome.",
         "Summarize: The city council voted on Tuesday to expand the bike lane network by 40 kilometres over the "
         "next three years. The council said the bike lanes will connect the university, the train station and the "
         "old town, and that the bike lanes will be separated from car traffic where the streets are wide enough."]
with open(sys.argv[1], "w") as f:
    for i, c in enumerate(chats):
        f.write(json.dumps({"id": f"chat-{i}", "messages": [{"role": "user", "content": c}]}) + "\n")
    f.write(json.dumps({"id": "code", "prompt": "def merge_sorted(a, b):\n    \"\"\"Merge two sorted lists.\"\"\"\n"}) + "\n")
PY
table() {  # model prompts [label:options...]; each table overwrites the previous table's files
  local model=$1 prompts=$2; shift 2
  printf "%-15s %7s %6s %6s %9s %6s %s\n" strategy tokens steps S tokens/s "x AR" lossless
  local spec
  for spec in "ar:ar" "lade-W5N4G5:lade --window 5 --ngram 4 --guesses 5" "trie:trie" "prompt-lookup:prompt-lookup" "$@"; do
    local label=${spec%%:*} opts=${spec#*:}
    # shellcheck disable=SC2086
    "$BIN" generate --model "$model" --threads "$THREADS" --input "$prompts" --output "$OUT/$label.jsonl" \
      --max-new-tokens "$N" --strategy $opts --stats-json "$OUT/$label.stats.json" --quiet --overwrite
    python3 - "$OUT" "$label" <<'PY'
import json, sys
out, s = sys.argv[1], sys.argv[2]
def load(lbl):
    a = json.load(open(f"{out}/{lbl}.stats.json"))["aggregate"]
    return a, [json.loads(l)["ids"] for l in open(f"{out}/{lbl}.jsonl")], a["new_tokens"] / (a["seconds"] - a["prefill_s"])
a, ids, tps = load(s)
_, ar_ids, ar_tps = load("ar")
print(f"{s[:15]:15s} {a['new_tokens']:7d} {a['steps']:6d} {a['compression']:6.2f} {tps:9.1f} {tps / ar_tps:6.2f} "
      f"{'yes' if ids == ar_ids else 'NO'}")
PY
  done
}
table "$MODEL" "$OUT/prompts.jsonl"
echo "(tokens/s: decoding only, prefill excluded; S = new tokens / forward steps)"

if [ -d "$SHARED/models/stories260K" ]; then
  echo
  echo "== 3. TinyStories: stories260K (260K parameters), 8 story prompts, $N new tokens"
  head -n 8 "$SHARED/datasets/tinystories/prompts.jsonl" > "$OUT/stories.jsonl"
  table "$SHARED/models/stories260K" "$OUT/stories.jsonl" "lade:lade"
  echo
  echo "First story (prompt lookup):"
  python3 -c "import json,sys; r=json.loads(open(sys.argv[1]).readline()); print(r['prompt'] + r['text'])" \
    "$OUT/prompt-lookup.jsonl"
fi
