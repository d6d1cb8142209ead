#!/usr/bin/env bash
# A failing or dying rank never hangs the job: it ends non-zero within 30 s and the messages name the rank.
#   1. rank 1 gets a bad model path (it throws while loading)            -> "[rank 1] error: ..."
#   2. rank 1 loads a different model (startup agreement check)           -> names rank 1
#   3. rank 1 is killed with kill -9 in the middle of a generation        -> mpirun names rank 1
#   4. rank 0 is killed with kill -9 in the middle of a generation        -> mpirun names rank 0
#   5. rank 2 is stopped (SIGSTOP: alive but stuck), --rank-timeout 5     -> rank 0 names rank 2
# Also a kill -9 through launch/mpirun.sh, and its bad settings (LA_ABORT_GRACE, LA_START_TIMEOUT) refused by name.
# labels: mpi
# timeout: 600
set -u
BUILD=$1; SRC=$2; SHARED=$3
source "$SRC/tests/scripts/lib.sh"  # need_*, test_tmp, rank_pid, wait_rank, within
need_model
M2=$SHARED/models/llama2xs
LIMIT=30
need_mpi
need_flag --comm

test_tmp
head -n 400 "$P" > "$T/many.jsonl"
long=(generate --input "$T/many.jsonl" --max-new-tokens 200 --strategy lade --quiet --threads 1 --comm mpi)
fails=0

# verdict NAME RC SECONDS NEEDLE: non-zero, within LIMIT, stderr matches NEEDLE (extended regex).
verdict() {
  local name=$1 rc=$2 secs=$3 needle=$4
  if [ "$rc" = 0 ]; then
    echo "FAIL: $name: the job exited 0"; fails=$((fails + 1))
  elif within "$secs" "$LIMIT"; then
    if grep -qE -- "$needle" "$T/err"; then
      echo "ok: $name: exit $rc after ${secs} s; $(grep -E -m1 -- "$needle" "$T/err" | head -c 160)"
    else
      echo "FAIL: $name: exit $rc after ${secs} s but stderr does not match /$needle/:"
      sed 's/^/    /' "$T/err" | tail -n 20; fails=$((fails + 1))
    fi
  else
    echo "FAIL: $name: took ${secs} s (limit $LIMIT s), exit $rc"; sed 's/^/    /' "$T/err" | tail -n 20
    fails=$((fails + 1))
  fi
}

# 1. A bad model path on rank 1 (MPMD: same binary, different arguments).
t0=$(now)
timeout 120 mpirun --oversubscribe --bind-to none \
  -np 1 "$BIN" generate --model "$M" --prompt "Once upon a time" --max-new-tokens 20 --quiet --comm mpi \
    --output "$T/o1.jsonl" : \
  -np 1 "$BIN" generate --model "$T/no/such/model" --prompt "Once upon a time" --max-new-tokens 20 --quiet \
    --comm mpi --output "$T/o1.jsonl" >"$T/out" 2>"$T/err"
rc=$?
verdict "bad model path on rank 1" $rc "$(elapsed "$t0" "$(now)")" "\[rank 1\] error"

# 2. A different model on rank 1 (the startup agreement check).
if [ -d "$M2" ]; then
  t0=$(now)
  timeout 120 mpirun --oversubscribe --bind-to none \
    -np 1 "$BIN" generate --model "$M" --prompt "Once upon a time" --max-new-tokens 20 --quiet --comm mpi \
      --output "$T/o2.jsonl" : \
    -np 1 "$BIN" generate --model "$M2" --prompt "Once upon a time" --max-new-tokens 20 --quiet --comm mpi \
      --output "$T/o2.jsonl" >"$T/out" 2>"$T/err"
  rc=$?
  verdict "different model on rank 1" $rc "$(elapsed "$t0" "$(now)")" "rank\(s\) 1|rank 1"
fi

# kill_mid_run NAME NP SIGNAL VICTIM NEEDLE [launcher...]: start a long generation, wait until rank 0 has
# written results (the ranks are in the decode loop), send SIGNAL to rank VICTIM, time the job's end.
kill_mid_run() {
  local name=$1 np=$2 sig=$3 victim=$4 needle=$5; shift 5
  local out=$T/kill-$np-$victim.jsonl
  rm -f "$out"
  if [ $# -gt 0 ]; then
    LOOKAHEAD_BIN=$BIN LA_LAUNCH_QUIET=1 timeout 300 "$@" -np "$np" "${long[@]}" --lp-size "$np" --model "$M" --output "$out" \
      --rank-timeout 5 >"$T/out" 2>"$T/err" &
  else
    timeout 300 mpirun -np "$np" --oversubscribe --bind-to none "$BIN" "${long[@]}" --lp-size "$np" --model "$M" --output "$out" \
      --rank-timeout 5 >"$T/out" 2>"$T/err" &
  fi
  JOB=$!
  local pid; pid=$(wait_rank "$out" 1 "$victim")  # up to 60 s for startup and the first results
  if [ -z "$pid" ] || ! kill -0 "$JOB" 2>/dev/null; then
    echo "FAIL: $name: the job did not get going (rank $victim pid '${pid}')"; sed 's/^/    /' "$T/err" | tail
    fails=$((fails + 1)); stop_job; return
  fi
  sleep 0.5
  local t0; t0=$(now)
  kill "-$sig" "$pid"
  wait "$JOB"; local rc=$?
  local t1; t1=$(now)
  JOB=""
  [ "$sig" = STOP ] && kill -9 "$pid" 2>/dev/null
  verdict "$name" $rc "$(elapsed "$t0" "$t1")" "$needle"
}

kill_mid_run "kill -9 rank 1 of 3 mid-run" 3 9 1 "rank 1"
kill_mid_run "kill -9 rank 0 of 2 mid-run" 2 9 0 "rank 0"
kill_mid_run "SIGSTOP rank 2 of 3 (stuck), --rank-timeout 5" 3 STOP 2 "rank\(s\) 2"
kill_mid_run "kill -9 rank 1 of 2 under launch/mpirun.sh" 2 9 1 "rank 1" "$SRC/launch/mpirun.sh"

# launch/mpirun.sh refuses a bad LA_ABORT_GRACE or LA_START_TIMEOUT before it starts anything: exit 2, named.
for bad_env in "LA_ABORT_GRACE=-1" "LA_START_TIMEOUT=abc" "LA_START_TIMEOUT=1.5"; do
  LOOKAHEAD_BIN=$BIN LA_LAUNCH_QUIET=1 env "$bad_env" timeout 30 "$SRC/launch/mpirun.sh" -np 2 generate --model "$M" \
    --prompt Once --max-new-tokens 2 --quiet --comm mpi >"$T/out" 2>"$T/err"
  rc=$?
  if [ $rc = 2 ] && grep -q "mpirun.sh: ${bad_env%%=*} must be whole seconds (got '${bad_env#*=}')" "$T/err"; then
    echo "ok: launch/mpirun.sh with $bad_env: exit 2, $(head -c 120 "$T/err")"
  else
    echo "FAIL: launch/mpirun.sh with $bad_env: exit $rc, $(head -c 200 "$T/err")"; fails=$((fails + 1))
  fi
done

[ $fails = 0 ] && echo "PASS" || echo "$fails failure(s)"
[ $fails = 0 ]
