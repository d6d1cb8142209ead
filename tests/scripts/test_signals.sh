#!/usr/bin/env bash
# Batch jobs survive signals: SIGTERM mid-run stops a one-process run and a 2-rank mpirun job within 5 s with the
# documented status, leaves valid JSONL (no partial line) and a loadable --trie-state file, and --resume then
# completes the output to exactly the records of an uninterrupted run (ids compared record by record).
#   1. one process, SIGTERM                                  -> 143
#   2. 2 ranks under launch/mpirun.sh, SIGTERM to the wrapper -> 143 (mpirun itself gets it and forwards it)
#   3. 2 ranks under plain mpirun, SIGTERM to mpirun         -> non-zero (mpirun's own status), rank 0 reports it
#   4. 2 ranks, SIGTERM to rank 1 only                       -> rank 0 stops the job cleanly: 143
#   5. SIGINT twice: the second exits at once                -> 130
#   6. an existing --output without --resume/--overwrite is an error; --overwrite replaces it; a cut-off last
#      line is redone
#   7. a sampled run resumes to the same records
# labels: mpi
# timeout: 900
set -u
BUILD=$1; SRC=$2; SHARED=$3
source "$SRC/tests/scripts/lib.sh"  # expect_error, need_*, test_tmp, ok/bad, valid_jsonl, same_records, wait_records
need_model
LIMIT=5
need_flag --resume
mpi_env
test_tmp
fails=0; n=0

NP=240  # with 80, a 2-rank job on a quiet machine (6000 tokens/s) finished before mpirun passed the signal on
head -n $NP "$P" > "$T/p.jsonl"
# A 0.05 s progress interval: the 5 records awaited before the signal take far longer, so a progress line is
# printed whatever the machine's speed (a 1 s interval made the check depend on the load). --adaptive off: every
# step carries the trie's full 64-token draft, so the 80 requests take seconds; with the CPU kernels and the
# controller's plain steps they took 0.7 s, and a 2-rank job finished before its SIGTERM arrived.
G=(generate --model "$M" --input "$T/p.jsonl" --max-new-tokens 64 --strategy trie --adaptive off --threads 1
   --progress-interval 0.05)

# The reference: one uninterrupted run.
"$BIN" "${G[@]}" --output "$T/ref.jsonl" --quiet 2>"$T/err" || { cat "$T/err"; skip "the reference run failed"; }
[ "$(lines "$T/ref.jsonl")" = $NP ] || bad "reference run wrote $(lines "$T/ref.jsonl") of $NP records"


# interrupt NAME WANT_RC SIGNAL_TARGET OUT STATE -- command...: start the job, wait for >= 5 records, send SIGTERM to
# the pid printed by SIGNAL_TARGET (a function of the job's pid), check the exit and the files.
interrupt() {
  local name=$1 want=$2 target=$3 out=$4 state=$5; shift 6
  rm -f "$out" "$state"
  "$@" >"$T/out" 2>"$T/err" &
  JOB=$!
  wait_records "$out" 5
  local pid; pid=$($target "$JOB")
  if ! kill -0 "$JOB" 2>/dev/null || [ -z "$pid" ]; then
    bad "$name: the job did not get going (or finished) before the signal"; sed 's/^/    /' "$T/err" | tail
    stop_job; return 1
  fi
  term_job "$pid" 300 2
  local rc=$JOB_RC secs=$JOB_SECS
  local got; got=$(lines "$out")
  if within "$secs" "$LIMIT"; then
    ok "$name: exit after $secs s"
  else
    bad "$name: took $secs s (limit $LIMIT s)"
  fi
  if [ "$want" = nonzero ]; then
    [ "$rc" != 0 ] && ok "$name: status $rc (non-zero)" || bad "$name: status 0"
  else
    [ "$rc" = "$want" ] && ok "$name: status $rc" || { bad "$name: status $rc, wanted $want"; sed 's/^/    /' "$T/err" | tail; }
  fi
  grep -q "interrupted by SIGTERM" "$T/err" && ok "$name: rank 0 says it was interrupted" ||
    { bad "$name: no 'interrupted by SIGTERM' line"; sed 's/^/    /' "$T/err" | tail; }
  [ "$got" -lt $NP ] && ok "$name: stopped midway ($got of $NP records)" || bad "$name: the run was not interrupted"
  local why; why=$(valid_jsonl "$out" 2>&1) && ok "$name: valid JSONL" || bad "$name: invalid JSONL: $why"
  [ -s "$state" ] && ok "$name: trie state saved" || bad "$name: no trie state file"
}

# resume NAME OUT STATE -- command...: --resume loads the state and completes the output to the reference.
resume() {
  local name=$1 out=$2 state=$3; shift 4
  if "$@" --resume --stats-json "$T/rs.json" >"$T/out" 2>"$T/err"; then
    ok "$name: --resume run finished"
  else
    bad "$name: --resume run failed"; sed 's/^/    /' "$T/err" | tail; return
  fi
  python3 -c "import json,sys; c=json.load(open(sys.argv[1]))['counters']; sys.exit(0 if c['trie_loaded_nodes'] > 0 else 1)" \
    "$T/rs.json" && ok "$name: the trie state file was loaded" || bad "$name: trie state not loaded"
  local why; why=$(same_records "$T/ref.jsonl" "$out" 2>&1) && ok "$name: resumed output equals the uninterrupted run" ||
    bad "$name: resumed output differs: $why"
}

self() { echo "$1"; }
# 1. One process.
S1=(--output "$T/o1.jsonl" --trie-state "$T/t1.bin")
interrupt "1 process, SIGTERM" 143 self "$T/o1.jsonl" "$T/t1.bin" -- "$BIN" "${G[@]}" "${S1[@]}"
grep -q "prompts (" "$T/err" && ok "progress lines on stderr" || bad "no progress line on stderr"
resume "1 process" "$T/o1.jsonl" "$T/t1.bin" -- "$BIN" "${G[@]}" "${S1[@]}" --quiet

if command -v mpirun >/dev/null 2>&1; then
  # One lookahead-parallel group of 2 ranks (--lp-size 2); groups of 1 under signals: test_mpi_groups.sh.
  MPI=(mpirun -np 2 --oversubscribe --bind-to none)
  # 2. launch/mpirun.sh: the wrapper forwards the signal to mpirun and exits 143.
  S2=(--output "$T/o2.jsonl" --trie-state "$T/t2.bin" --comm mpi --lp-size 2)
  LOOKAHEAD_BIN=$BIN LA_LAUNCH_QUIET=1 interrupt "2 ranks (launch/mpirun.sh), SIGTERM" 143 self "$T/o2.jsonl" \
    "$T/t2.bin" -- "$SRC/launch/mpirun.sh" -np 2 "${G[@]}" "${S2[@]}"
  resume "2 ranks" "$T/o2.jsonl" "$T/t2.bin" -- "${MPI[@]}" "$BIN" "${G[@]}" "${S2[@]}" --quiet

  # 3. Plain mpirun: SIGCONT at once, SIGTERM to every rank 1 s later, SIGKILL 1 s after that; mpirun exits 1.
  S3=(--output "$T/o3.jsonl" --trie-state "$T/t3.bin" --comm mpi --lp-size 2)
  interrupt "2 ranks (plain mpirun), SIGTERM" nonzero self "$T/o3.jsonl" "$T/t3.bin" -- \
    "${MPI[@]}" "$BIN" "${G[@]}" "${S3[@]}"
  resume "2 ranks (plain mpirun)" "$T/o3.jsonl" "$T/t3.bin" -- "${MPI[@]}" "$BIN" "${G[@]}" "${S3[@]}" --quiet

  # 4. Only rank 1 gets the signal: it reports it in its next reply and rank 0 stops the job cleanly.
  rank1() { rank_pid 1; }  # the rank-1 process of this test's job (the only job running)
  S4=(--output "$T/o4.jsonl" --trie-state "$T/t4.bin" --comm mpi --lp-size 2)
  interrupt "2 ranks, SIGTERM to rank 1 only" nonzero rank1 "$T/o4.jsonl" "$T/t4.bin" -- \
    "${MPI[@]}" "$BIN" "${G[@]}" "${S4[@]}"
  grep -q "rank 1 received SIGTERM" "$T/err" && ok "rank 0 names rank 1's signal" || bad "rank 0 did not name rank 1"
else
  echo "skip: mpirun not installed (MPI cases)"
fi

# 5. SIGINT twice: a slow request (Jacobi, 257-token steps on every step: --adaptive off, or the draft controller
# shrinks them to plain steps and a request ends in 0.2 s) and a long --stop-grace would keep the first SIGINT
# waiting for the request in flight; the second one exits at once. The first SIGINT goes 0.2 s after the first
# record, so the second request has begun (a signal between two requests rightly stops at once).
"$BIN" generate --model "$M" --input "$T/p.jsonl" --max-new-tokens 300 --strategy jacobi --jacobi-block 256 \
  --adaptive off --threads 1 --stop-grace 60 --output "$T/o5.jsonl" --quiet >"$T/out" 2>"$T/err" &
JOB=$!
for ((i = 0; i < 1200; i++)); do [ "$(lines "$T/o5.jsonl")" -ge 1 ] && break; sleep 0.05; done
sleep 0.2; kill -INT "$JOB"; sleep 0.3
if kill -0 "$JOB" 2>/dev/null; then
  t0=$(now); kill -INT "$JOB"; wait "$JOB"; rc=$?; t1=$(now); JOB=""
  secs=$(elapsed "$t0" "$t1" 2)
  [ "$rc" = 130 ] && ok "SIGINT twice: status 130" || bad "SIGINT twice: status $rc, wanted 130"
  within "$secs" 1 &&
    ok "second SIGINT: exit after $secs s" || bad "second SIGINT: took $secs s"
  why=$(valid_jsonl "$T/o5.jsonl" 2>&1) && ok "SIGINT twice: valid JSONL" || bad "SIGINT twice: invalid JSONL: $why"
else
  wait "$JOB"; rc=$?; JOB=""
  bad "the first SIGINT ended the run at once (status $rc): the request in flight should have been finishing"
fi

# 6. Never clobber an existing output by accident.
echo '{"id": "x"}' > "$T/exists.jsonl"
expect_error "already exists and is not empty" generate --model "$M" --input "$T/p.jsonl" --output "$T/exists.jsonl" \
  --max-new-tokens 4 --quiet
expect_error "only one of --resume and --overwrite" generate --model "$M" --input "$T/p.jsonl" \
  --output "$T/exists.jsonl" --resume --overwrite --quiet
expect_error "which is not in the input" generate --model "$M" --input "$T/p.jsonl" --output "$T/exists.jsonl" \
  --resume --max-new-tokens 4 --quiet
head -n 3 "$T/p.jsonl" > "$T/p3.jsonl"
if "$BIN" generate --model "$M" --input "$T/p3.jsonl" --output "$T/exists.jsonl" --overwrite --max-new-tokens 4 \
     --quiet 2>"$T/err" && [ "$(lines "$T/exists.jsonl")" = 3 ]; then ok "--overwrite replaces the file"
else bad "--overwrite did not replace the file"; fi
# A cut-off last line is dropped and redone by --resume.
head -n 2 "$T/exists.jsonl" > "$T/cut.jsonl"; tail -n 1 "$T/exists.jsonl" | head -c 40 >> "$T/cut.jsonl"
if "$BIN" generate --model "$M" --input "$T/p3.jsonl" --output "$T/cut.jsonl" --resume --max-new-tokens 4 --quiet \
     2>"$T/err" && same_records "$T/exists.jsonl" "$T/cut.jsonl" >/dev/null 2>&1; then
  ok "--resume drops a cut-off last line and rewrites it"
else bad "--resume with a cut-off last line: $(cat "$T/err")"; fi

# 7. Sampled runs resume to the same records too (the sampling stream is the prompt's index, not a counter).
head -n 10 "$T/p.jsonl" > "$T/p10.jsonl"
SMP=(generate --model "$M" --input "$T/p10.jsonl" --max-new-tokens 32 --temperature 0.8 --top-p 0.9 --seed 7
     --strategy lade --threads 1 --quiet)
"$BIN" "${SMP[@]}" --output "$T/s-full.jsonl" 2>"$T/err" || bad "sampled run failed: $(cat "$T/err")"
head -n 4 "$T/s-full.jsonl" > "$T/s-res.jsonl"; sed -n 5p "$T/s-full.jsonl" | head -c 100 >> "$T/s-res.jsonl"
"$BIN" "${SMP[@]}" --output "$T/s-res.jsonl" --resume 2>"$T/err" || bad "sampled --resume failed: $(cat "$T/err")"
why=$(same_records "$T/s-full.jsonl" "$T/s-res.jsonl" 2>&1) && ok "sampled (T=0.8) --resume equals the full run" ||
  bad "sampled --resume differs: $why"

[ $fails = 0 ] && echo "PASS ($n checks)" || echo "$fails of $n checks failed"
[ $fails = 0 ]
