#!/usr/bin/env bash
# Continuous batching through the real binary: `generate --input --batch N` gives every request the ids of
# decoding it alone (--batch 1) for every strategy, in bf16, sampled, with --batch auto (the choice printed), and
# with prompts fed in small chunks; records carry every id once; the summary says how the step budget was spent; a
# prompt that can never fit --kv-memory is refused by name while the others complete (non-zero exit), also at
# --batch 1, and a budget below one KV row is an error; SIGTERM
# mid-batch exits 143 with valid records and --resume completes exactly the uninterrupted records; bad values of
# the new flags are one clear error each; records with their own generation settings (max_new_tokens, temperature,
# top_k, top_p, seed) mixed in one batch each equal their own settings' run alone, and bad values name the line.
# labels: cli
# timeout: 600
set -u
BUILD=$1; SRC=$2; SHARED=$3
BIN=$BUILD/lookahead
M=$SHARED/models/stories260K
D=$SHARED/models/llama2xs
P=$SHARED/datasets/tinystories/prompts.jsonl
export OMP_NUM_THREADS=1
T=$(mktemp -d)
JOB=""
cleanup() { [ -n "$JOB" ] && kill -9 "$JOB" 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT
fails=0; n=0
source "$SRC/tests/scripts/lib.sh"  # expect_error
ok() { n=$((n+1)); echo "ok: $*"; }
bad() { n=$((n+1)); fails=$((fails+1)); echo "FAIL: $*"; }
head -n 14 "$P" > "$T/p.jsonl"
printf '%s\n' '{"id": "rep1", "prompt": "The cat sat on the mat. The cat sat on the mat. The cat"}' \
  '{"id": "rep2", "prompt": "one two three four five one two three four five one two"}' >> "$T/p.jsonl"
NP=$(wc -l < "$T/p.jsonl")
# by_id FILE: {id: ids} as one sorted line (records arrive in finishing order under --batch).
by_id() { python3 -c "
import json,sys
r={json.dumps(json.loads(l)['id']): json.loads(l)['ids'] for l in open(sys.argv[1])}
print(len(r), sorted(r.items()))" "$1"; }
run() { "$BIN" generate --model "$M" --input "$T/p.jsonl" --output "$T/$1.jsonl" --overwrite --max-new-tokens 48 \
          --threads 1 "${@:2}" 2>"$T/$1.err"; }
same() {  # same A B WHAT
  if [ "$(by_id "$T/$1.jsonl")" == "$(by_id "$T/$2.jsonl")" ]; then ok "$3"; else bad "$3: ids differ"; fi
}

run ar --strategy ar --batch 1 || bad "plain --batch 1 failed"
for s in ar jacobi lade trie prompt-lookup suffix ouroboros; do
  extra=(); [ $s = ouroboros ] && extra=(--draft-model "$D")
  run "b_$s" --strategy $s --batch 4 --prefill-chunk 7 "${extra[@]}" || bad "$s --batch 4 failed: $(tail -1 "$T/b_$s.err")"
  same "b_$s" ar "$s --batch 4 equals plain decoding alone"
done
grep -q "batch 4: .* forwards (.* s), .* rows each" "$T/b_trie.err" && ok "summary line: $(grep 'batch 4:' "$T/b_trie.err")" \
  || bad "no batch summary line"
# --stats-json under --batch: every slot's strategy counters (slot 0's are "counters"), the default strategy.
run cnt --batch 4 --stats-json "$T/cnt.json" || bad "default strategy --batch 4 failed"
same cnt ar "the default strategy (suffix) with --batch 4 equals plain decoding"
python3 - "$T/cnt.json" <<'PY' && ok "counters_by_slot: one suffix map per slot" || bad "counters_by_slot missing or wrong"
import json, sys
s = json.load(open(sys.argv[1]))
by = s["counters_by_slot"]
assert len(by) == 4 and by[0] == s["counters"], (len(by), by[:1], s["counters"])
assert all("suffix_steps" in c for c in by), by
assert sum(c["suffix_steps"] for c in by) > by[0]["suffix_steps"], [c["suffix_steps"] for c in by]
PY
# ... and the batched loop's own counters: what the summary line prints, the forwards' wall time within the run's.
python3 - "$T/cnt.json" "$T/cnt.err" <<'PY' && ok "stats batch: forwards, rows and forward seconds as the summary line says" \
  || bad "stats batch object missing or inconsistent"
import json, re, sys
s = json.load(open(sys.argv[1])); b = s["batch"]; a = s["aggregate"]
line = [l for l in open(sys.argv[2]) if "batch 4:" in l][0]
m = re.search(r"batch 4: (\d+) forwards \(([\d.]+) s\), ([\d.]+) rows each", line)
assert m and int(m.group(1)) == b["forwards"], (line, b)
assert abs(float(m.group(2)) - b["forward_s"]) < 0.06, (line, b)
assert abs(float(m.group(3)) - b["rows"] / b["forwards"]) < 0.06, (line, b)
assert 0 < b["forward_s"] <= a["seconds"], (b, a["seconds"])
assert b["max_in_flight"] == 4 and b["slot_steps"] == a["steps"] and b["prefill_rows"] > 0, (b, a["steps"])
assert b["rows"] == b["slot_steps"] + b["draft_rows"] + b["prefill_rows"], b
PY

run auto --strategy suffix || bad "--batch auto failed"
same auto ar "--batch auto equals plain decoding"
grep -q "batch [0-9]* (auto; modelled plain tokens/s" "$T/auto.err" && ok "auto: $(grep '(auto;' "$T/auto.err")" \
  || bad "--batch auto printed no choice"

run bf1 --strategy ar --batch 1 --dtype bf16 || bad "bf16 --batch 1 failed"
run bf6 --strategy trie --batch 6 --dtype bf16 --prefill-chunk 3 || bad "bf16 --batch 6 failed"
same bf6 bf1 "bf16: trie --batch 6 equals plain --batch 1"

run s1 --strategy lade --batch 1 --temperature 0.8 --top-p 0.9 --seed 5 || bad "sampled --batch 1 failed"
run s5 --strategy lade --batch 5 --temperature 0.8 --top-p 0.9 --seed 5 || bad "sampled --batch 5 failed"
same s5 s1 "sampled: --batch 5 equals --batch 1 (per-request streams)"

# Records with their own settings (max_new_tokens, OpenAI's max_tokens, temperature, top_k, top_p, seed) in one
# batch: each request equals the whole file decoded alone (--batch 1) with those settings as flags, the same index
# (so the same sampling stream); the run says how many records set what.
python3 - "$T/p.jsonl" "$T/own.jsonl" <<'PY'
import json, sys
own = [{}, {"max_new_tokens": 5}, {"temperature": 0.8, "top_p": 0.9, "seed": 7},
       {"temperature": 1.0, "top_k": 5, "max_tokens": 20}]
with open(sys.argv[2], "w") as f:
    for i, l in enumerate(open(sys.argv[1])):
        r = json.loads(l); r.update(own[i % 4]); f.write(json.dumps(r) + "\n")
PY
FLAGS=("--max-new-tokens 48" "--max-new-tokens 5" "--max-new-tokens 48 --temperature 0.8 --top-p 0.9 --seed 7"
       "--max-new-tokens 20 --temperature 1.0 --top-k 5")
for k in 0 1 2 3; do
  # shellcheck disable=SC2086
  "$BIN" generate --model "$M" --input "$T/p.jsonl" --output "$T/own_ref$k.jsonl" --overwrite --threads 1 \
    --strategy ar --batch 1 ${FLAGS[$k]} 2>/dev/null || bad "reference with flags '${FLAGS[$k]}' failed"
done
for b in 1 5; do
  "$BIN" generate --model "$M" --input "$T/own.jsonl" --output "$T/own_b$b.jsonl" --overwrite --max-new-tokens 48 \
    --threads 1 --batch $b --prefill-chunk 5 2>"$T/own_b$b.err" || bad "records with own settings, --batch $b failed"
  python3 - "$T" $b <<'PY' && ok "own settings per record, --batch $b (suffix): each equals its flags' run alone" \
    || bad "own settings per record, --batch $b: a request differs from its flags' run"
import json, sys
T, b = sys.argv[1], sys.argv[2]
load = lambda f: {json.dumps(json.loads(l)["id"]): json.loads(l) for l in open(f)}
got = load(f"{T}/own_b{b}.jsonl")
refs = [load(f"{T}/own_ref{k}.jsonl") for k in range(4)]
order = [json.dumps(json.loads(l)["id"]) for l in open(f"{T}/own.jsonl")]
assert len(got) == len(order), (len(got), len(order))
for i, key in enumerate(order):
    want = refs[i % 4][key]
    assert got[key]["ids"] == want["ids"], (i, key, got[key]["ids"], want["ids"])
lens = [got[key]["new_tokens"] for key in order]
assert lens[1] == 5 and lens[3] == 20 and max(lens[0::4]) > 5, lens
PY
done
# The input through a pipe (read once, like a file): the same records.
"$BIN" generate --model "$M" --input <(cat "$T/own.jsonl") --output "$T/own_pipe.jsonl" --overwrite \
  --max-new-tokens 48 --threads 1 --batch 5 --prefill-chunk 5 --quiet && same own_pipe own_b5 "--input from a pipe" \
  || bad "--input from a pipe failed"
grep -q "12 of 16 records set their own max_new_tokens (8), temperature (8), top_k (4), top_p (4), seed (4)" \
  "$T/own_b5.err" && ok "start line: $(grep 'records set their own' "$T/own_b5.err" | head -c 160)" \
  || bad "no line about the records' own settings"
for rec in '"temperature": -1' '"top_p": 0' '"top_k": 2.5' '"max_new_tokens": "many"' '"seed": -3' \
           '"max_new_tokens": 5, "max_tokens": 6'; do
  echo "{\"id\": \"x\", \"prompt\": \"Once\", $rec}" > "$T/badown.jsonl"
  key=$(echo "$rec" | sed 's/^"\([a-z_]*\)".*/\1/')
  expect_error "badown.jsonl:1: \"$key\"" generate --model "$M" --input "$T/badown.jsonl" --output "$T/x.jsonl" --overwrite
done

# A prompt that can never fit the KV budget is refused by name; the job goes on, then exits non-zero.
python3 -c "
import json
print(json.dumps({'id': 'long', 'prompt': 'Once upon a time ' * 60}))
for i in range(3): print(json.dumps({'id': f's{i}', 'prompt': 'Once upon a time'}))" > "$T/kv.jsonl"
# With one request in flight too (--batch 1 ran past the bound before: its loop did not read --kv-memory).
for b in 2 1; do
  "$BIN" generate --model "$M" --input "$T/kv.jsonl" --output "$T/kv.out" --overwrite --max-new-tokens 16 --batch $b \
    --kv-memory 200K 2>"$T/kv.err"; rc=$?
  if [ $rc -ne 0 ] && [ $rc -lt 128 ] && grep -q 'prompt "long" needs .* KV cache rows' "$T/kv.err" \
     && [ "$(wc -l < "$T/kv.out")" = 3 ]; then ok "refused at --batch $b: $(grep 'prompt "long"' "$T/kv.err" | head -c 150)"
  else bad "kv refusal at --batch $b: rc=$rc, records $(wc -l < "$T/kv.out")"; cat "$T/kv.err"; fi
done

# SIGTERM mid-batch: 143, valid records, then --resume completes to the uninterrupted records.
head -n 60 "$P" > "$T/long.jsonl"
G=(generate --model "$M" --input "$T/long.jsonl" --max-new-tokens 200 --strategy trie --adaptive off --threads 1
   --batch 6 --quiet)
"$BIN" "${G[@]}" --output "$T/ref.jsonl" 2>/dev/null || bad "reference run failed"
"$BIN" "${G[@]}" --output "$T/cut.jsonl" 2>"$T/cut.err" & JOB=$!
for _ in $(seq 200); do [ "$(cat "$T/cut.jsonl" 2>/dev/null | wc -l)" -ge 5 ] && break; sleep 0.05; done
kill -TERM $JOB; wait $JOB; rc=$?; JOB=""
got=$(wc -l < "$T/cut.jsonl")
if [ $rc = 143 ] && [ "$got" -lt 60 ]; then ok "SIGTERM mid-batch: 143 after $got records"
else bad "SIGTERM: rc=$rc with $got records"; fi
python3 -c "
import json,sys
data=open(sys.argv[1],'rb').read(); assert data.endswith(b'\n')
ids=[json.dumps(json.loads(l)['id']) for l in data.decode().splitlines()]; assert len(ids)==len(set(ids))" "$T/cut.jsonl" \
  && ok "records valid after SIGTERM" || bad "records corrupt after SIGTERM"
"$BIN" "${G[@]}" --output "$T/cut.jsonl" --resume 2>/dev/null || bad "--resume failed"
same cut ref "--resume after SIGTERM completes to the uninterrupted records"

expect_error "--batch" generate --model "$M" --input "$T/p.jsonl" --output "$T/x.jsonl" --overwrite --batch 0
expect_error "--batch" generate --model "$M" --input "$T/p.jsonl" --output "$T/x.jsonl" --overwrite --batch many
expect_error "--prefill-chunk" generate --model "$M" --input "$T/p.jsonl" --output "$T/x.jsonl" --overwrite --prefill-chunk 0
expect_error "--kv-memory" generate --model "$M" --input "$T/p.jsonl" --output "$T/x.jsonl" --overwrite --kv-memory 12X
expect_error "--kv-memory" generate --model "$M" --input "$T/p.jsonl" --output "$T/x.jsonl" --overwrite --kv-memory -5
# Less than one KV row: 0 rows read as "not given" before, and the job ran unbounded.
expect_error "holds no KV cache row" generate --model "$M" --input "$T/p.jsonl" --output "$T/x.jsonl" --overwrite --kv-memory 1 --quiet
echo "test_cli_batch: $((n - fails))/$n passed"
[ "$fails" -eq 0 ]
