#!/usr/bin/env bash
# Continuous batching under lookahead parallelism with real MPI ranks: 2 ranks as one LP group (--lp-size 2),
# --batch 3, every rank holding every request's cache and each step's plans split across the ranks:
#   1. every record's ids equal a one-process --batch 1 run's, for lade and trie with fixed drafts (the partition
#      splits their trees), suffix with adaptive drafting, and prompts fed in small chunks (--prefill-chunk 5);
#      and 4 ranks as 2 groups of 2, each batching (--batch 2); and in one process over 3 simulated replicas;
#      --batch auto on the group prints its choice and the layout line priced at it, and the same ids; records
#      with their own sampling settings, lengths and stop sequences (each slot's parameters reach the worker);
#   2. SIGTERM mid-job (launch/mpirun.sh forwards it): status 143, valid records equal to the reference's, and
#      --resume (the same LP batch) completes exactly the reference's records;
#   3. SIGSTOP of the LP worker mid-job with --rank-timeout 5: rank 0 names it, non-zero exit, no hang.
# labels: mpi
# timeout: 600
set -u
BUILD=$1; SRC=$2; SHARED=$3
source "$SRC/tests/scripts/lib.sh"  # need_*, test_tmp, ok/bad, same_records, rank_pid, wait_*, term_job
need_model
need_mpi
command -v python3 >/dev/null 2>&1 || skip "python3 not installed"
need_flag --lp-size

test_tmp
awk 'NR % 97 == 1' "$P" | head -n 12 > "$T/prompts.jsonl"
MPI=(mpirun --oversubscribe --bind-to none -np 2)
fails=0; n=0

# 1. Exactness against one process, --batch 1.
for s in "lade --adaptive off" "trie --adaptive off" "suffix"; do
  common=(generate --model "$M" --input "$T/prompts.jsonl" --max-new-tokens 40 --quiet --threads 1 --strategy $s)
  name=${s%% *}
  if ! "$BIN" "${common[@]}" --batch 1 --output "$T/$name.ref.jsonl" >"$T/log" 2>&1; then
    bad "$s: the one-process run failed"; tail -n 5 "$T/log" | sed 's/^/    /'; continue
  fi
  timeout 300 "${MPI[@]}" "$BIN" "${common[@]}" --lp-size 2 --comm mpi --batch 3 --prefill-chunk 5 \
    --output "$T/$name.lp.jsonl" >"$T/log" 2>&1
  rc=$?
  if [ $rc != 0 ]; then
    bad "$s, 1 group of 2, --batch 3: exit $rc"; tail -n 8 "$T/log" | sed 's/^/    /'
  elif why=$(same_records "$T/$name.ref.jsonl" "$T/$name.lp.jsonl" count=12 2>&1); then
    ok "$s, 1 group of 2, --batch 3: every record's ids equal one process's --batch 1"
  else
    bad "$s, 1 group of 2, --batch 3: $why"
  fi
  # The same in one process: 3 simulated replicas (the in-process group), --batch 4.
  if "$BIN" "${common[@]}" --simulate-ranks 3 --batch 4 --prefill-chunk 3 --output "$T/$name.sim.jsonl" >"$T/log" 2>&1 &&
     why=$(same_records "$T/$name.ref.jsonl" "$T/$name.sim.jsonl" count=12 2>&1); then
    ok "$s, --simulate-ranks 3, --batch 4: every record's ids equal --batch 1"
  else
    bad "$s, --simulate-ranks 3, --batch 4: ${why:-the run failed}"; tail -n 5 "$T/log" | sed 's/^/    /'
  fi
done

# Groups that batch: 4 ranks as 2 groups of 2 (each owner batches its requests over its own LP worker).
common=(generate --model "$M" --input "$T/prompts.jsonl" --max-new-tokens 40 --quiet --threads 1 --strategy trie
        --adaptive off)
timeout 300 mpirun --oversubscribe --bind-to none -np 4 "$BIN" "${common[@]}" --lp-size 2 --comm mpi --batch 2 \
  --output "$T/trie.2x2.jsonl" >"$T/log" 2>&1
rc=$?
if [ $rc != 0 ]; then
  bad "trie, 2 groups of 2, --batch 2: exit $rc"; tail -n 8 "$T/log" | sed 's/^/    /'
elif why=$(same_records "$T/trie.ref.jsonl" "$T/trie.2x2.jsonl" count=12 2>&1); then
  ok "trie, 2 groups of 2, --batch 2: every record's ids equal one process's --batch 1"
else
  bad "trie, 2 groups of 2, --batch 2: $why"
fi

# Records with their own settings (sampled and greedy, own lengths, stop sequences) under LP: each slot's sampling parameters reach
# the worker with its slot, so the group's records equal one process's --batch 1 (test_cli_batch: equal to each
# record's settings given as flags).
python3 - "$T/prompts.jsonl" "$T/own.jsonl" <<'PY'
import json, sys
own = [{"stop": "."}, {"max_new_tokens": 7}, {"temperature": 0.9, "top_p": 0.95, "seed": 3, "stop": [",", "."]},
       {"temperature": 1.0, "top_k": 4}]
with open(sys.argv[2], "w") as f:
    for i, l in enumerate(open(sys.argv[1])):
        r = json.loads(l); r.update(own[i % 4]); f.write(json.dumps(r) + "\n")
PY
own=(generate --model "$M" --input "$T/own.jsonl" --max-new-tokens 40 --quiet --threads 1 --strategy suffix)
if ! "$BIN" "${own[@]}" --batch 1 --output "$T/own.ref.jsonl" >"$T/log" 2>&1; then
  bad "own settings: the one-process run failed"; tail -n 5 "$T/log" | sed 's/^/    /'
else
  timeout 300 "${MPI[@]}" "$BIN" "${own[@]}" --lp-size 2 --comm mpi --batch 3 --output "$T/own.lp.jsonl" >"$T/log" 2>&1
  rc=$?
  if [ $rc != 0 ]; then
    bad "own settings, 1 group of 2, --batch 3: exit $rc"; tail -n 8 "$T/log" | sed 's/^/    /'
  elif ! grep -q '"finish_reason":"stop"' "$T/own.lp.jsonl"; then
    bad "own settings, 1 group of 2, --batch 3: no request ended at a stop sequence"
  elif why=$(same_records "$T/own.ref.jsonl" "$T/own.lp.jsonl" count=12 2>&1); then
    ok "records with their own settings, 1 group of 2, --batch 3: every record's ids equal one process's --batch 1"
  else
    bad "own settings, 1 group of 2, --batch 3: $why"
  fi
fi

# --batch auto on a group of 2 chooses as on one rank (the choice printed, the layout line priced at it), same ids.
loud=(); for a in "${common[@]}"; do [ "$a" = --quiet ] || loud+=("$a"); done
timeout 300 "${MPI[@]}" "$BIN" "${loud[@]}" --lp-size 2 --comm mpi --output "$T/trie.auto.jsonl" \
  >"$T/log" 2>&1
rc=$?
if [ $rc != 0 ]; then
  bad "trie, 1 group of 2, --batch auto: exit $rc"; tail -n 8 "$T/log" | sed 's/^/    /'
elif ! grep -q "batch [0-9]* (auto; modelled plain tokens/s" "$T/log"; then
  bad "trie, 1 group of 2, --batch auto: no choice printed"; grep -i "batch\|layout" "$T/log" | sed 's/^/    /'
elif ! grep -q "modelled job tokens/s by layout (groups x ranks each, batch [0-9]* each" "$T/log"; then
  bad "trie, 1 group of 2, --batch auto: the layout line does not price the batch"; grep layout "$T/log"
elif why=$(same_records "$T/trie.ref.jsonl" "$T/trie.auto.jsonl" count=12 2>&1); then
  ok "trie, 1 group of 2, $(grep -o 'batch [0-9]* (auto' "$T/log"): every record's ids equal --batch 1"
else
  bad "trie, 1 group of 2, --batch auto: $why"
fi

# 2. SIGTERM mid-job, then --resume.
NP=120
head -n $NP "$P" > "$T/pn.jsonl"
S=(generate --model "$M" --input "$T/pn.jsonl" --max-new-tokens 64 --strategy lade --adaptive off --threads 1 --quiet)
"$BIN" "${S[@]}" --batch 1 --output "$T/s.ref.jsonl" >"$T/log" 2>&1 || bad "the SIGTERM reference run failed"
LB=(--lp-size 2 --comm mpi --batch 3)
rm -f "$T/r.jsonl"
LOOKAHEAD_BIN=$BIN LA_LAUNCH_QUIET=1 "$SRC/launch/mpirun.sh" -np 2 "${S[@]}" "${LB[@]}" --output "$T/r.jsonl" \
  --stop-grace 0.5 >"$T/out" 2>"$T/err" &
JOB=$!
wait_records "$T/r.jsonl" 5 1200
if ! kill -0 "$JOB" 2>/dev/null; then
  bad "SIGTERM: the job ended before the signal"; tail -n 5 "$T/err" | sed 's/^/    /'; wait "$JOB"; JOB=""
else
  term_job "$JOB" 600
  got=$(lines "$T/r.jsonl")
  if [ "$JOB_RC" = 143 ] && within "$JOB_SECS" 10 && grep -q "interrupted by SIGTERM" "$T/err" &&
     [ "$got" -lt $NP ] && why=$(same_records "$T/s.ref.jsonl" "$T/r.jsonl" partial 2>&1); then
    ok "SIGTERM, 1 group of 2, --batch 3: status 143 after $JOB_SECS s, $got of $NP records, equal to one process's"
  else
    bad "SIGTERM: status $JOB_RC after $JOB_SECS s, $got records ${why:-}"; tail -n 8 "$T/err" | sed 's/^/    /'
  fi
  if timeout 300 "${MPI[@]}" "$BIN" "${S[@]}" "${LB[@]}" --output "$T/r.jsonl" --resume >"$T/log" 2>&1 &&
     why=$(same_records "$T/s.ref.jsonl" "$T/r.jsonl" 2>&1); then
    ok "--resume, 1 group of 2, --batch 3: completes to the same $NP records"
  else
    bad "--resume: ${why:-the run failed}"; tail -n 8 "$T/log" | sed 's/^/    /'
  fi
fi

# 3. The LP worker stops answering (SIGSTOP) mid-job: rank 0 names it after --rank-timeout, the job ends non-zero.
rm -f "$T/h.jsonl"
timeout 120 "${MPI[@]}" "$BIN" "${S[@]}" "${LB[@]}" --output "$T/h.jsonl" --rank-timeout 5 >"$T/out" 2>"$T/err" &
JOB=$!
if pid=$(wait_rank "$T/h.jsonl" 2 1) && kill -0 "$JOB" 2>/dev/null; then
  t0=$(now)
  kill -STOP "$pid"
  wait "$JOB"; rc=$?
  JOB=""
  kill -9 "$pid" 2>/dev/null
  secs=$(elapsed "$t0" "$(now)")
  if [ "$rc" != 0 ] && [ "$rc" != 124 ] && grep -q "rank(s) 1\|rank 1" "$T/err" && valid_jsonl "$T/h.jsonl"; then
    ok "SIGSTOP of the LP worker: exit $rc after $secs s naming rank 1, records valid"
  else
    bad "SIGSTOP of the LP worker: exit $rc after $secs s"; tail -n 8 "$T/err" | sed 's/^/    /'
  fi
else
  bad "SIGSTOP: the job did not get going"; tail -n 5 "$T/err" | sed 's/^/    /'; stop_job
fi

[ $fails = 0 ] && echo "PASS ($n checks)" || echo "$fails failure(s) of $n"
[ $fails = 0 ]
