#!/usr/bin/env bash
# Ouroboros through the real binary: the same ids as --strategy ar on 5 prompts (stories260K target, llama2xs
# draft; adaptive and fixed drafts), the phrase pool state file written and reloaded, and draft models that do not share the target's
# tokenizer (different tokenizer.model bytes, different vocabulary) refused with one clear error line.
# labels: cli
# timeout: 300
set -u
BUILD=$1; SRC=$2; SHARED=$3
BIN=$BUILD/lookahead
M=$SHARED/models/stories260K
D=$SHARED/models/llama2xs
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
fails=0; n=0
ok() { n=$((n+1)); echo "ok: $*"; }
bad() { n=$((n+1)); fails=$((fails+1)); echo "FAIL: $*"; }

head -n 5 "$SHARED/datasets/tinystories/prompts.jsonl" >"$T/p.jsonl"
G=(generate --quiet --model "$M" --input "$T/p.jsonl" --max-new-tokens 48 --threads 1)
ids() { python3 -c 'import json,sys; [print(json.dumps([r["id"], r["ids"]])) for r in map(json.loads, open(sys.argv[1]))]' "$1" | sort; }

"$BIN" "${G[@]}" --output "$T/ar.jsonl" --strategy ar || bad "ar run failed"
# The adaptive default: on this pair (a draft model as large as the target) the controller's ledger keeps the draft
# model asleep (draft_controller.h), so the drafting mechanics below run with --adaptive off.
"$BIN" "${G[@]}" --output "$T/ou_a.jsonl" --strategy ouroboros --draft-model "$D" || bad "adaptive ouroboros run failed"
if [ "$(ids "$T/ar.jsonl")" == "$(ids "$T/ou_a.jsonl")" ]; then ok "adaptive ouroboros ids equal ar"
else bad "adaptive ouroboros ids differ from ar"; fi
for args in "--adaptive off" "--adaptive off --gamma 4 --extensions 5 --draft-window 5 --draft-ngram 3 --draft-guesses 5"; do
  # shellcheck disable=SC2086
  if "$BIN" "${G[@]}" --output "$T/ou.jsonl" --overwrite --strategy ouroboros --draft-model "$D" --pool-state "$T/pool.bin" \
       --stats-json "$T/s.json" $args 2>"$T/err"; then
    if [ "$(ids "$T/ar.jsonl")" == "$(ids "$T/ou.jsonl")" ]; then ok "ouroboros $args ids equal ar"
    else bad "ouroboros $args ids differ from ar"; fi
    [ -s "$T/pool.bin" ] && ok "pool state written" || bad "no pool state file"
    python3 - "$T/s.json" <<'PY' || bad "stats counters"
import json, sys
s = json.load(open(sys.argv[1])); c = s["counters"]; a = s["aggregate"]
for k in ("draft_forwards", "draft_tokens_per_forward", "draft_acceptance", "extension_accepted", "pool_phrases"):
    assert k in c, k
assert c["draft_forwards"] > 0 and c["pool_phrases"] > 0, c
print("   S=%.2f draft/fwd=%.2f acceptance=%.3f pool=%d" % (a["compression"], c["draft_tokens_per_forward"],
      c["draft_acceptance"], c["pool_phrases"]))
PY
  else
    bad "ouroboros $args run failed: $(cat "$T/err")"
  fi
done

source "$SRC/tests/scripts/lib.sh"  # expect_error
E=(generate --quiet --model "$M" --prompt "Once upon a time" --max-new-tokens 8 --strategy ouroboros)
cp -r "$D" "$T/d_tok"
head -c 4000 /dev/urandom >"$T/d_tok/tokenizer.model"
expect_error "draft model tokenizer differs from the target's" "${E[@]}" --draft-model "$T/d_tok"
expect_error "draft model vocabulary (300) differs" "${E[@]}" --draft-model random:tiny-mha
expect_error "needs --draft-model" "${E[@]}"
printf 'LAPHRASEjunk' >"$T/badpool.bin"
expect_error "phrase pool state file" "${E[@]}" --draft-model "$D" --pool-state "$T/badpool.bin"

echo "$((n-fails)) passed, $fails failed"
[ $fails -eq 0 ]
