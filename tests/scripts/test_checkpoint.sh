#!/usr/bin/env bash
# The strategy's state is saved after every finished request (Strategy::checkpoint, src/cli/request_loop.cpp): a
# one-process batch job killed with SIGKILL mid-batch (no handler, no exit hook runs) still leaves a state file
# that holds exactly the finished requests: byte for byte the file an uninterrupted run of those requests writes
# (so it is loadable and nothing is lost but the request in flight); --resume with it then completes the output
# to the records of an uninterrupted run. For --trie-state (trie) and --suffix-state (suffix); ouroboros's
# --pool-state goes through the same StateCheckpoint (its own round trip: tests/model/test_ouroboros.cpp), but a
# batch with its draft model takes over a minute here.
# labels: cli
# timeout: 300
set -u
BUILD=$1; SRC=$2; SHARED=$3
source "$SRC/tests/scripts/lib.sh"  # need_model, test_tmp, ok/bad, wait_records, same_records
need_model
export OMP_NUM_THREADS=1
test_tmp
fails=0; n=0

# 240 prompts and --adaptive off (every step carries the full draft): the whole command takes ~1 s (suffix) and
# ~1.5 s (trie) here, and the kill, 0.1 s after the 4th record, lands at 30-50 records. With 60 prompts the suffix
# job wrote 48-54 of them by then and, once drafts stopped at each request's last token, sometimes all 60 (a CI
# run of 2026-11-28 failed so).
NP=240
head -n $NP "$P" > "$T/p.jsonl"
# --batch 1: the state after k finished requests is compared byte for byte with a run of those k requests; with
# several requests in flight it also holds the branches the unfinished ones have generated so far.
G=(generate --model "$M" --max-new-tokens 48 --adaptive off --threads 1 --quiet --batch 1)
declare -A ARGS=(
  [trie]="--strategy trie --decoding-length 32 --trie-state"
  [suffix]="--strategy suffix --suffix-state"
)

# kill_case NAME: run the batch, SIGKILL it once 4 records are out, check the state file, resume.
kill_case() {
  local name=$1 extra out=$T/$1.jsonl state=$T/$1.state
  read -r -a extra <<<"${ARGS[$name]}"
  "$BIN" "${G[@]}" --input "$T/p.jsonl" "${extra[@]}" "$T/$name.ref-state" --output "$T/$name.ref.jsonl" \
    2>"$T/err" || { bad "$name: the uninterrupted run failed"; tail -n 3 "$T/err"; return; }
  "$BIN" "${G[@]}" --input "$T/p.jsonl" "${extra[@]}" "$state" --output "$out" 2>"$T/err" &
  JOB=$!
  wait_records "$out" 4
  sleep 0.1  # into the next request
  if ! kill -9 "$JOB" 2>/dev/null; then bad "$name: the job ended before the kill"; JOB=""; return; fi
  wait "$JOB" 2>/dev/null; JOB=""
  local nrec; nrec=$(lines "$out")
  if [ "$nrec" -ge "$NP" ]; then bad "$name: the job finished before the kill"; return; fi
  if [ ! -s "$state" ]; then bad "$name: killed after $nrec records: no state file"; return; fi
  # The state of exactly the first n requests, from an uninterrupted run of those alone. A kill that fell
  # between record n's write and its checkpoint (about a millisecond) leaves the state of n - 1.
  local k got=""
  for k in "$nrec" $((nrec - 1)); do
    head -n "$k" "$T/p.jsonl" > "$T/first.jsonl"
    rm -f "$T/first.state"
    "$BIN" "${G[@]}" --input "$T/first.jsonl" "${extra[@]}" "$T/first.state" --output "$T/first.out" --overwrite \
      2>"$T/err" \
      || { bad "$name: the run of the first $k prompts failed"; tail -n 3 "$T/err"; return; }
    if cmp -s "$state" "$T/first.state"; then got=$k; break; fi
  done
  if [ "$got" = "$nrec" ]; then ok "$name: SIGKILL after $nrec of $NP records: the state file ($(stat -c %s "$state") bytes) is that of the $nrec finished requests"
  elif [ -n "$got" ]; then ok "$name: SIGKILL after $nrec records, between the last record and its checkpoint: the state holds $got requests"
  else bad "$name: SIGKILL after $nrec records: the state file is neither that of $nrec nor of $((nrec - 1)) requests"; fi
  "$BIN" "${G[@]}" --input "$T/p.jsonl" "${extra[@]}" "$state" --output "$out" --resume 2>"$T/err" \
    || { bad "$name: --resume with the saved state failed"; tail -n 3 "$T/err"; return; }
  if same_records "$T/$name.ref.jsonl" "$out" count="$NP" >/dev/null 2>&1; then ok "$name: --resume completed to the $NP records of the uninterrupted run"
  else bad "$name: the resumed records differ from the uninterrupted run"; fi
}

for name in trie suffix; do kill_case "$name"; done
[ $fails = 0 ] && echo "PASS" || echo "$fails failure(s)"
[ $fails = 0 ]
