#!/usr/bin/env bash
# The main job: sets up if needed, then decodes a few story prompts with ../shared/models/stories260K, streaming
# the text, first with plain autoregressive decoding and then with lookahead strategies, and prints tokens/s,
# steps and the speed ratio. The outputs are compared token by token (lossless).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$ROOT/launch/setup.sh"
BIN=$ROOT/build/lookahead
SHARED=${LOOKAHEAD_SHARED:-$ROOT/../shared}
MODEL=${MODEL:-$SHARED/models/stories260K}
N=${N:-160}
OUT=$(mktemp -d); trap 'rm -rf "$OUT"' EXIT
echo
echo "== streaming one prompt (plain decoding, then LADE)"
"$BIN" generate --model "$MODEL" --prompt "Once upon a time, there was a little girl named Lily. She" \
  --max-new-tokens "$N"
"$BIN" generate --model "$MODEL" --prompt "Once upon a time, there was a little girl named Lily. She" \
  --max-new-tokens "$N" --strategy lade
echo
echo "== 8 story prompts, every strategy (greedy, fp32, CPU)"
head -n 8 "$SHARED/datasets/tinystories/prompts.jsonl" > "$OUT/prompts.jsonl"
printf "%-15s %8s %8s %8s %10s %8s %s\n" strategy tokens steps S tokens/s ratio lossless
base_tps=""
for s in ar jacobi lade trie prompt-lookup; do
  "$BIN" generate --model "$MODEL" --input "$OUT/prompts.jsonl" --output "$OUT/$s.jsonl" --max-new-tokens "$N" \
    --strategy "$s" --stats-json "$OUT/$s.stats.json" --quiet
  python3 - "$OUT" "$s" <<'PY'
import json, sys
out, s = sys.argv[1], sys.argv[2]
st = json.load(open(f"{out}/{s}.stats.json"))["aggregate"]
recs = [json.loads(l) for l in open(f"{out}/{s}.jsonl")]
ar = [json.loads(l) for l in open(f"{out}/ar.jsonl")]
same = all(a["ids"] == b["ids"] for a, b in zip(recs, ar))
tps = st["new_tokens"] / sum(r["seconds"] for r in recs)
base = json.load(open(f"{out}/ar.stats.json"))["aggregate"]
btps = base["new_tokens"] / sum(r["seconds"] for r in ar)
print(f"{s:15s} {st['new_tokens']:8d} {st['steps']:8d} {st['compression']:8.2f} {tps:10.1f} {tps/btps:8.2f} {'yes' if same else 'NO'}")
PY
done
echo
echo "First story (lade):"
python3 -c "import json,sys; r=json.loads(open(sys.argv[1]).readline()); print(r['prompt'] + r['text'])" "$OUT/lade.jsonl"
