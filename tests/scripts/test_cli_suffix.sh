#!/usr/bin/env bash
# --strategy suffix through the real binary: ids equal plain decoding (one process and --simulate-ranks 2), the
# --suffix-state file round-trips across runs, and a corrupt file, another model's file and a bad value are each
# one clear error.
# labels: cli
# timeout: 300
set -u
BUILD=$1; SRC=$2; SHARED=$3
BIN=$BUILD/lookahead
M=$SHARED/models/stories260K
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
fails=0; n=0
source "$SRC/tests/scripts/lib.sh"  # expect_error
printf '%s\n' '{"id": "a", "prompt": "Once upon a time, there was a little girl named Lily. She liked to play"}' \
  '{"id": "b", "prompt": "The cat sat on the mat. The cat sat on the mat. The cat"}' >"$T/p.jsonl"
ids() { python3 -c "import json,sys; print(sorted((json.dumps(json.loads(l)['id']), json.loads(l)['ids']) for l in open(sys.argv[1])))" "$1"; }
run() { "$BIN" generate --model "$M" --input "$T/p.jsonl" --output "$T/$1.jsonl" --overwrite --max-new-tokens 60 --quiet "${@:2}"; }
check() {  # check LABEL: same ids as plain decoding
  n=$((n+1))
  if [ "$(ids "$T/$1.jsonl")" == "$(ids "$T/ar.jsonl")" ]; then echo "ok: $1 equals plain decoding"
  else echo "FAIL: $1 differs from plain decoding"; fails=$((fails+1)); fi
}
run ar --strategy ar || fails=$((fails+1))
run sfx --strategy suffix --suffix-state "$T/s.state" || fails=$((fails+1)); check sfx
n=$((n+1)); [ -s "$T/s.state" ] && echo "ok: state saved" || { echo "FAIL: no state file"; fails=$((fails+1)); }
run warm --strategy suffix --suffix-state "$T/s.state" --stats-json "$T/st.json" || fails=$((fails+1)); check warm
n=$((n+1))
if python3 -c "import json,sys; c=json.load(open(sys.argv[1]))['counters']; sys.exit(0 if c['suffix_loaded_sequences'] == 2 else 1)" "$T/st.json"
then echo "ok: warm run loaded 2 outputs"; else echo "FAIL: warm run did not load the state"; fails=$((fails+1)); fi
run sim --strategy suffix --simulate-ranks 2 --adaptive off || fails=$((fails+1)); check sim
printf 'LASUFX\r\ngarbage' >"$T/bad.state"
expect_error "suffix state file '$T/bad.state'" generate --model "$M" --prompt Once --strategy suffix --suffix-state "$T/bad.state"
expect_error "another model or tokenizer" generate --model "$SHARED/models/llama2xs" --prompt Once --strategy suffix \
  --suffix-state "$T/s.state"
expect_error "--suffix-depth" generate --model "$M" --prompt Once --strategy suffix --suffix-depth 1
echo "test_cli_suffix: $((n - fails))/$n passed"
[ "$fails" -eq 0 ]
