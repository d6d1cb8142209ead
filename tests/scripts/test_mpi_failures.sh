#!/usr/bin/env bash
# A failing or dying rank never hangs the job: it ends non-zero within 30 s and the messages name the rank.
#   1. rank 1 gets a bad model path (it throws while loading)            -> "[rank 1] error: ..."
#   2. rank 1 loads a different model (startup agreement check)           -> names rank 1
#   3. rank 1 is killed with kill -9 in the middle of a generation        -> mpirun names rank 1
#   4. rank 0 is killed with kill -9 in the middle of a generation        -> mpirun names rank 0
#   5. rank 2 is stopped (SIGSTOP: alive but stuck), --rank-timeout 5     -> rank 0 names rank 2
# Also a kill -9 through launch/mpirun.sh.
# labels: mpi
# timeout: 600
set -u
BUILD=$1; SRC=$2; SHARED=$3
BIN=$BUILD/lookahead
M=$SHARED/models/stories260K
M2=$SHARED/models/llama2xs
P=$SHARED/datasets/tinystories/prompts.jsonl
LIMIT=30
skip() { echo "SKIP: $*"; exit 77; }
[ -x "$BIN" ] || skip "$BIN is not built"
[ -d "$M" ] && [ -f "$P" ] || skip "shared model or prompts missing"
command -v mpirun >/dev/null 2>&1 || skip "mpirun not installed"
"$BIN" generate --help 2>&1 | grep -q -- "--comm" || skip "lookahead generate has no --comm option yet"
[ "$(id -u)" = 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMP_NUM_THREADS=1

T=$(mktemp -d)
JOB=""
cleanup() {
  [ -n "$JOB" ] && kill -9 "$JOB" 2>/dev/null
  for p in $(rank_pids_any); do kill -CONT "$p" 2>/dev/null; kill -9 "$p" 2>/dev/null; done
  rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 143' TERM INT HUP
head -n 400 "$P" > "$T/many.jsonl"
long=(generate --input "$T/many.jsonl" --max-new-tokens 200 --strategy lade --quiet --threads 1 --comm mpi)
fails=0
now() { date +%s.%N; }
elapsed() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$1" "$2"; }

# Ranks of our jobs: processes whose command line holds this test's temp dir and whose environment holds the
# rank Open MPI gave them.
rank_pid() {
  local r=$1 p pid
  for p in /proc/[0-9]*; do
    pid=${p#/proc/}
    { tr '\0' '\n' < "$p/cmdline" | grep -qF -- "$T/"; } 2>/dev/null || continue
    { tr '\0' '\n' < "$p/environ" | grep -qx "OMPI_COMM_WORLD_RANK=$r"; } 2>/dev/null && { echo "$pid"; return 0; }
  done
  return 1
}
rank_pids_any() {
  local p
  for p in /proc/[0-9]*; do
    { tr '\0' '\n' < "$p/cmdline" | grep -qF -- "$T/"; } 2>/dev/null || continue
    { tr '\0' '\n' < "$p/environ" | grep -q "^OMPI_COMM_WORLD_RANK="; } 2>/dev/null && echo "${p#/proc/}"
  done
}

# verdict NAME RC SECONDS NEEDLE: non-zero, within LIMIT, stderr matches NEEDLE (extended regex).
verdict() {
  local name=$1 rc=$2 secs=$3 needle=$4
  if [ "$rc" = 0 ]; then
    echo "FAIL: $name: the job exited 0"; fails=$((fails + 1))
  elif python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) <= $LIMIT else 1)" "$secs"; then
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
  local i pid=""
  for ((i = 0; i < 600; i++)); do  # up to 60 s for startup and the first results
    if [ -s "$out" ] && pid=$(rank_pid "$victim"); then break; fi
    kill -0 "$JOB" 2>/dev/null || break
    sleep 0.1
  done
  if [ -z "$pid" ] || ! kill -0 "$JOB" 2>/dev/null; then
    echo "FAIL: $name: the job did not get going (rank $victim pid '${pid}')"; sed 's/^/    /' "$T/err" | tail
    fails=$((fails + 1)); kill -9 "$JOB" 2>/dev/null; wait "$JOB" 2>/dev/null; JOB=""; return
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

[ $fails = 0 ] && echo "PASS" || echo "$fails failure(s)"
[ $fails = 0 ]
