#!/usr/bin/env bash
# The strong-scaling simulation (one process, K replicas sharing weights, parts run one after another) emits the
# same ids as a plain run, and writes its modelled numbers; save-model round-trips a random model.
# labels: cli
# timeout: 300
set -u
BUILD=$1; SRC=$2; SHARED=$3
BIN=$BUILD/lookahead
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
head -n 6 "$SHARED/datasets/tinystories/prompts.jsonl" > "$T/p.jsonl"
fails=0; n=0
check() { n=$((n+1)); if eval "$2"; then echo "ok: $1"; else echo "FAIL: $1"; fails=$((fails+1)); fi; }
"$BIN" generate --model "$SHARED/models/stories260K" --input "$T/p.jsonl" --output "$T/ar.jsonl" --max-new-tokens 48 -q
for s in lade trie; do
  for k in 1 3; do
    "$BIN" generate --model "$SHARED/models/stories260K" --input "$T/p.jsonl" --output "$T/$s$k.jsonl" \
      --max-new-tokens 48 --strategy $s --simulate-ranks $k --collective-latency-us 20 --stats-json "$T/$s$k.json" -q
    check "$s simulate-ranks $k ids == ar" "python3 -c \"import json,sys; a=sorted((json.dumps(json.loads(l)['id']), json.loads(l)['ids']) for l in open('$T/ar.jsonl')); b=sorted((json.dumps(json.loads(l)['id']), json.loads(l)['ids']) for l in open('$T/$s$k.jsonl')); sys.exit(a!=b)\""
    check "$s simulate-ranks $k stats" "python3 -c \"import json,sys; s=json.load(open('$T/$s$k.json')); sys.exit(not ('simulation' in s and s['simulation']['ranks'] == $k and s['simulation']['modelled_tokens_per_s'] > 0))\""
  done
done
# Lossless in every dtype on 2 ranks: the CPU kernels are batch-invariant, so a part of a plan computed on another
# replica gives the bits plain decoding gives (fixed drafts, so every step carries them).
for d in bf16 fp16; do
  "$BIN" generate --model "$SHARED/models/stories260K" --input "$T/p.jsonl" --output "$T/ar_$d.jsonl" --max-new-tokens 48 \
    --dtype $d -q
  for s in lade trie; do
    "$BIN" generate --model "$SHARED/models/stories260K" --input "$T/p.jsonl" --output "$T/${s}_$d.jsonl" \
      --max-new-tokens 48 --strategy $s --adaptive off --simulate-ranks 2 --dtype $d -q
    check "$s $d simulate-ranks 2 ids == ar $d" "python3 -c \"import json,sys; a=sorted((json.dumps(json.loads(l)['id']), json.loads(l)['ids']) for l in open('$T/ar_$d.jsonl')); b=sorted((json.dumps(json.loads(l)['id']), json.loads(l)['ids']) for l in open('$T/${s}_$d.jsonl')); sys.exit(a!=b)\""
  done
done
mkdir -p "$T/saved"
"$BIN" save-model --model random:tiny-gqa-bias:5 --out "$T/saved" >/dev/null
a=$("$BIN" score --model random:tiny-gqa-bias:5 --ids 1,5,9,33 | python3 -c "import json,sys; print(json.load(sys.stdin)['argmax'])")
b=$("$BIN" score --model "$T/saved" --ids 1,5,9,33 | python3 -c "import json,sys; print(json.load(sys.stdin)['argmax'])")
check "save-model round trip ($a vs $b)" "[ '$a' = '$b' ]"
echo "$((n-fails)) passed, $fails failed"
[ $fails -eq 0 ]
