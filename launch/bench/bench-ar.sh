#!/usr/bin/env bash
# Plain autoregressive decoding speed on this machine's CPU: tokens/s for ../shared/models/stories260K and for
# random:tinyllama-1.1b (dummy weights at the real 1.1B shape, fp32; a handful of tokens), printed as a table.
#   launch/bench/bench-ar.sh [--device cuda --dtype fp16]
set -euo pipefail
LA_NAME=bench-ar
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
"$ROOT/launch/setup.sh" >/dev/null
BIN=$BUILD/lookahead
EXTRA=("$@")
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
head -n 4 "$SHARED/datasets/tinystories/prompts.jsonl" > "$T/p4.jsonl"
head -n 1 "$SHARED/datasets/tinystories/prompts.jsonl" > "$T/p1.jsonl"
echo "machine: $(lscpu | sed -n 's/^Model name: *//p') ($(getconf _NPROCESSORS_ONLN) cores), ${EXTRA[*]:-cpu fp32}"
printf "%-26s %8s %8s %10s %12s %10s\n" model prompts tokens seconds tokens/s ms/token
row() {  # model prompts-file max-new
  "$BIN" generate --model "$1" --input "$2" --output "$T/o.jsonl" --overwrite --max-new-tokens "$3" --stats-json "$T/s.json" \
    --quiet --batch 1 --strategy ar "${EXTRA[@]}"
  python3 - "$T/s.json" "$1" "$(wc -l < "$2")" <<'PY'
import json, sys
a = json.load(open(sys.argv[1]))["aggregate"]
dec = a["seconds"] - a["prefill_s"]
print(f"{sys.argv[2].split('/')[-1]:26s} {sys.argv[3]:>8s} {a['new_tokens']:8d} {a['seconds']:10.2f} {a['new_tokens']/dec:12.1f} {1000*dec/a['new_tokens']:10.2f}")
PY
}
row "$SHARED/models/stories260K" "$T/p4.jsonl" 200
row "$SHARED/models/llama2xs" "$T/p4.jsonl" 200
row "random:tinyllama-1.1b" "$T/p1.jsonl" 8
echo "(tokens/s excludes the prefill; plain decoding, one token per forward)"
