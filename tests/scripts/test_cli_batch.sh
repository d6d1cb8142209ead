#!/usr/bin/env bash
# Continuous batching through the real binary: `generate --input --batch N` gives every request the ids of
# decoding it alone (--batch 1) for every strategy, in bf16, sampled, with --batch auto (the choice printed), and
# with prompts fed in small chunks; records carry every id once; the summary says how the step budget was spent; a
# prompt that can never fit --kv-memory is refused by name while the others complete (non-zero exit), also at
# --batch 1, and a budget below one KV row is an error; the batch's draft cap is reported (and off with
# --draft-cap off); SIGTERM
# mid-batch exits 143 with valid records and --resume completes exactly the uninterrupted records; bad values of
# the new flags are one clear error each; records with their own generation settings (max_new_tokens, temperature,
# top_k, top_p, seed) mixed in one batch each equal their own settings' run alone, and bad values name the line;
# stop sequences (--stop, a record's "stop") cut each request at the first token completing one, for every kind of
# draft.
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
# The batch's draft cap (draft_cap.h, on by default with adaptive drafting): the steps under each cap in the
# summary and in the stats, as many as the forwards with two or more requests deciding; --draft-cap off: none, ids
# unchanged.
python3 - "$T/cnt.json" "$T/cnt.err" <<'PY' && ok "draft cap: steps per cap in the summary and the stats" \
  || bad "draft cap steps missing or inconsistent"
import json, re, sys
b = json.load(open(sys.argv[1]))["batch"]; caps = b["draft_cap_steps"]
assert list(caps)[-1] == "none" and sum(caps.values()) > 0, caps
assert sum(caps.values()) <= b["forwards"], (caps, b)
line = [l for l in open(sys.argv[2]) if "batch 4:" in l][0]
m = re.search(r"draft cap \(steps\): (.*)$", line.strip())
assert m and {k: int(v) for k, v in (x.split() for x in m.group(1).split(", "))} == caps, (line, caps)
PY
run nocap --batch 4 --draft-cap off --stats-json "$T/nocap.json" || bad "--draft-cap off failed"
same nocap ar "--draft-cap off with --batch 4 equals plain decoding"
grep -q "draft cap" "$T/nocap.err" && bad "--draft-cap off still capped: $(grep 'batch 4:' "$T/nocap.err")" \
  || ok "--draft-cap off: no cap in the summary"
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

# Stop sequences (--stop, a record's "stop" replacing it): each request's ids are plain decoding's (no stop) cut at
# the first token whose text completes one of its sequences (that token kept, none after it, even when a draft
# accepted past it), finish_reason "stop" and the record's "stop" naming it; a request whose output holds none ends
# as plain decoding does. Suffix, LADE, trie and prompt lookup, batched and not.
"$BIN" generate --model "$M" --input "$T/p.jsonl" --output "$T/stop_ref.jsonl" --overwrite --max-new-tokens 64 \
  --threads 1 --strategy ar --batch 1 2>/dev/null || bad "stop: the plain run failed"
# Every other record its own "stop": the text of plain decoding's output tokens 30-31 (mid-output, where drafts
# are often accepted past it); some none ([]); the rest the flags' "." and ",".
python3 - "$T" "$BIN" "$M" <<'PY'
import json, subprocess, sys
T, BIN, M = sys.argv[1:]
ref = [json.loads(l) for l in open(f"{T}/stop_ref.jsonl")]
with open(f"{T}/dec.jsonl", "w") as f:
    for i, r in enumerate(ref):
        for m in (30, 32):
            f.write(json.dumps({"id": f"{i}-{m}", "ids": r["prompt_ids"] + r["ids"][:m]}) + "\n")
out = subprocess.run([BIN, "tokenize", "--model", M, "--input", f"{T}/dec.jsonl", "--decode"], capture_output=True,
                     text=True, check=True).stdout.splitlines()
mid = {json.dumps(r["id"]): json.loads(out[2 * i + 1])["text"][len(json.loads(out[2 * i])["text"]):]  # tokens 30-31
       for i, r in enumerate(ref)}
with open(f"{T}/stops.jsonl", "w") as f:
    for i, l in enumerate(open(f"{T}/p.jsonl")):
        r = json.loads(l); k = json.dumps(r["id"])
        if i % 4 in (1, 2) and mid[k].strip(): r["stop"] = [mid[k], "Lily"] if i % 4 == 2 else mid[k]
        if i % 4 == 3: r["stop"] = []
        f.write(json.dumps(r) + "\n")
PY
# Drafts fixed (--adaptive off): on this tiny model the adaptive default would run plain steps only, and the cut of
# the tokens a step accepted past the stop would go untested.
for cfg in "suffix 5" "lade 1" "trie 4" "prompt-lookup 3"; do
  set -- $cfg
  "$BIN" generate --model "$M" --input "$T/stops.jsonl" --output "$T/stop_$1.jsonl" --overwrite --max-new-tokens 64 \
    --threads 1 --strategy "$1" --adaptive off --batch "$2" --stop . --stop "," 2>/dev/null || bad "stop: $cfg failed"
  python3 - "$T" "$1" "$BIN" "$M" <<'PY' && ok "stop sequences, $1 --batch $2: $(cat "$T/stop_note")" \
    || bad "stop sequences, $1 --batch $2"
import json, subprocess, sys
T, s, BIN, M = sys.argv[1:]
load = lambda f: {json.dumps(json.loads(l)["id"]): json.loads(l) for l in open(f)}
ref, got, inp = load(f"{T}/stop_ref.jsonl"), load(f"{T}/stop_{s}.jsonl"), load(f"{T}/stops.jsonl")
# text(prompt, ids): the output's text after the prompt's (the records' decoding, leading space kept)
reqs = []
for k, r in got.items():
    for ids in ([], r["ids"], r["ids"][:-1]):
        reqs.append({"id": len(reqs), "ids": r["prompt_ids"] + ids})
with open(f"{T}/dec.jsonl", "w") as f:
    for q in reqs: f.write(json.dumps(q) + "\n")
out = subprocess.run([BIN, "tokenize", "--model", M, "--input", f"{T}/dec.jsonl", "--decode"], capture_output=True,
                     text=True, check=True).stdout.splitlines()
texts = [json.loads(l)["text"] for l in out]
stopped = 0
for n, (k, r) in enumerate(got.items()):
    stops = inp[k]["stop"] if "stop" in inp[k] else [".", ","]
    stops = [stops] if isinstance(stops, str) else stops
    base, whole, less = texts[3 * n], texts[3 * n + 1][len(texts[3 * n]):], texts[3 * n + 2][len(texts[3 * n]):]
    assert ref[k]["ids"][:len(r["ids"])] == r["ids"], (k, "not a prefix of plain decoding")
    if r["finish_reason"] == "stop":
        stopped += 1
        assert r["stop"] in stops and r["stop"] in whole and r["stop"] in r["text"], (k, r["stop"], whole)
        assert not any(x in less for x in stops), (k, "a stop sequence before the last token", less)
    else:
        assert "stop" not in r and r["ids"] == ref[k]["ids"], (k, r["finish_reason"])
        assert not any(x in whole for x in stops), (k, "a stop sequence not stopped at", whole)
assert stopped >= len(got) // 2, stopped
open(f"{T}/stop_note", "w").write(f"{stopped} of {len(got)} stopped, each at its first stop sequence")
PY
done
expect_error "--stop must not be empty" generate --model "$M" --input "$T/p.jsonl" --output "$T/x.jsonl" --overwrite --stop ""
echo '{"id": "x", "prompt": "Once", "stop": ["a", ""]}' > "$T/badstop.jsonl"
expect_error 'badstop.jsonl:1: "stop" must be a non-empty string' generate --model "$M" --input "$T/badstop.jsonl" \
  --output "$T/x.jsonl" --overwrite

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
expect_error "--draft-cap" generate --model "$M" --input "$T/p.jsonl" --output "$T/x.jsonl" --overwrite --draft-cap maybe
expect_error "--prefill-chunk" generate --model "$M" --input "$T/p.jsonl" --output "$T/x.jsonl" --overwrite --prefill-chunk 0
expect_error "--kv-memory" generate --model "$M" --input "$T/p.jsonl" --output "$T/x.jsonl" --overwrite --kv-memory 12X
expect_error "--kv-memory" generate --model "$M" --input "$T/p.jsonl" --output "$T/x.jsonl" --overwrite --kv-memory -5
# Less than one KV row: 0 rows read as "not given" before, and the job ran unbounded.
expect_error "holds no KV cache row" generate --model "$M" --input "$T/p.jsonl" --output "$T/x.jsonl" --overwrite --kv-memory 1 --quiet
echo "test_cli_batch: $((n - fails))/$n passed"
[ "$fails" -eq 0 ]
