# Shared by the test scripts (sourced; not a test itself). expect_error needs BIN, T (a temp dir), and counters n, fails.

# expect_error "needle" args...: `lookahead args...` must fail with exactly one stderr line containing needle,
# a non-zero exit below 128 (no signal), and no crash message.
expect_error() {
  local needle=$1; shift
  n=$((n+1))
  "$BIN" "$@" >"$T/out" 2>"$T/err"; local rc=$?
  local lines; lines=$(grep -c . "$T/err")
  if [ $rc -eq 0 ] || [ $rc -ge 128 ] || ! grep -q -- "$needle" "$T/err" || [ "$lines" != 1 ] \
     || grep -q -E "terminate|Segmentation|Aborted|core dumped" "$T/err"; then
    echo "FAIL: lookahead $* -> rc=$rc, stderr:"; sed 's/^/    /' "$T/err"; echo "    (wanted one line containing: $needle)"
    fails=$((fails+1))
  else
    echo "ok: $(head -c 150 "$T/err")"
  fi
}

# ---- Set-up, jobs and record checks shared by the MPI, signal and checkpoint scripts ----
# The scripts take BUILD SRC SHARED; after `source lib.sh` they call the helpers below. Counters: n (checks), fails.

skip() { echo "SKIP: $*"; exit 77; }  # ctest's SKIP_RETURN_CODE
ok() { n=$((n+1)); echo "ok: $*"; }
bad() { n=$((n+1)); fails=$((fails+1)); echo "FAIL: $*"; }
now() { date +%s.%N; }
# elapsed T0 T1 [DIGITS]: seconds between two `now` values (1 decimal by default).
elapsed() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.{int(sys.argv[3])}f}')" "$1" "$2" "${3:-1}"; }
# within SECS LIMIT: SECS <= LIMIT (floats).
within() { python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) <= float(sys.argv[2]) else 1)" "$1" "$2"; }
lines() { [ -f "$1" ] && wc -l < "$1" || echo 0; }

# need_model [MODEL PROMPTS]: BIN built and the shared stories260K model and TinyStories prompts present (sets BIN,
# M, P), else skip.
need_model() {
  BIN=$BUILD/lookahead
  M=${1:-$SHARED/models/stories260K}
  P=${2:-$SHARED/datasets/tinystories/prompts.jsonl}
  [ -x "$BIN" ] || skip "$BIN is not built"
  [ -d "$M" ] && [ -f "$P" ] || skip "shared model or prompts missing ($M, $P)"
}
# need_mpi: mpirun present; Open MPI allowed to run as root here; one OpenMP thread per rank.
need_mpi() {
  command -v mpirun >/dev/null 2>&1 || skip "mpirun not installed"
  mpi_env
}
mpi_env() {
  if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
  export OMP_NUM_THREADS=1
}
# need_flag OPTION: `lookahead generate --help` lists OPTION, else skip.
need_flag() { "$BIN" generate --help 2>&1 | grep -q -- "$1" || skip "lookahead generate has no $1"; }

# test_tmp: T (a temp dir), JOB (a background job the script may start); on exit the job and any MPI rank of this
# test (a process whose command line names T) are killed (stopped ones continued first) and T removed.
test_tmp() {
  T=$(mktemp -d)
  JOB=""
  trap test_cleanup EXIT
  trap 'exit 143' TERM INT HUP
}
test_cleanup() {
  [ -n "${JOB:-}" ] && kill -9 "$JOB" 2>/dev/null
  local p
  for p in $(rank_pids_any); do kill -CONT "$p" 2>/dev/null; kill -9 "$p" 2>/dev/null; done
  rm -rf "$T"
}
# rank_pid R: the pid of rank R (OMPI_COMM_WORLD_RANK) of this test's job; rank_pids_any: every such rank.
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
  [ -n "${T:-}" ] || return 0
  local p
  for p in /proc/[0-9]*; do
    { tr '\0' '\n' < "$p/cmdline" | grep -qF -- "$T/"; } 2>/dev/null || continue
    { tr '\0' '\n' < "$p/environ" | grep -q "^OMPI_COMM_WORLD_RANK="; } 2>/dev/null && echo "${p#/proc/}"
  done
}
# wait_records OUT N [TRIES=600] [PAUSE=0.05]: until OUT holds N records or JOB has ended.
wait_records() {
  local out=$1 want=$2 tries=${3:-600} pause=${4:-0.05} i
  for ((i = 0; i < tries; i++)); do
    [ "$(lines "$out")" -ge "$want" ] && return 0
    kill -0 "$JOB" 2>/dev/null || return 1
    sleep "$pause"
  done
  return 1
}
# wait_rank OUT N R: until OUT holds N records and rank R of JOB is found (up to 60 s); prints R's pid.
wait_rank() {
  local out=$1 want=$2 r=$3 i pid
  for ((i = 0; i < 600; i++)); do
    if [ "$(lines "$out")" -ge "$want" ] && pid=$(rank_pid "$r"); then echo "$pid"; return 0; fi
    kill -0 "$JOB" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}
# stop_job: kill -9 JOB and reap it.
stop_job() { kill -9 "$JOB" 2>/dev/null; wait "$JOB" 2>/dev/null; JOB=""; }
# term_job PID TICKS [DIGITS]: SIGTERM to PID (JOB itself or one of its ranks), then up to TICKS x 0.05 s for JOB to
# end; then JOB is killed if still there and reaped. Sets JOB_RC (its status) and JOB_SECS (signal to end).
term_job() {
  local t0 t1 waited=0
  t0=$(now)
  kill -TERM "$1"
  while kill -0 "$JOB" 2>/dev/null && [ $waited -lt "$2" ]; do sleep 0.05; waited=$((waited + 1)); done
  t1=$(now)
  kill -9 "$JOB" 2>/dev/null
  wait "$JOB"; JOB_RC=$?
  JOB=""
  JOB_SECS=$(elapsed "$t0" "$t1" "${3:-1}")
}

# valid_jsonl FILE: every line parses, the file ends with a newline, no id twice.
valid_jsonl() {
  python3 - "$1" <<'PY'
import json, sys
data = open(sys.argv[1], "rb").read()
assert not data or data.endswith(b"\n"), "the last line has no newline (partial write)"
ids = [json.dumps(json.loads(l)["id"]) for l in data.decode().splitlines()]
assert len(ids) == len(set(ids)), "an id appears twice"
PY
}
# same_records REF OUT [partial] [count=N]: compared by id (groups and --batch write in finishing order). Both files
# valid JSONL (whole lines, no id twice); every record of OUT has REF's ids for its id; without `partial` both hold
# the same ids; with count=N, REF holds N records. Prints the first differences.
same_records() {
  python3 - "$@" <<'PY'
import json, sys
def load(p):
    data = open(p, "rb").read()
    if data and not data.endswith(b"\n"):
        sys.exit(f"    {p}: the last line has no newline (a partial write)")
    recs = {}
    for line in data.decode().splitlines():
        if not line.strip():
            continue
        r = json.loads(line)
        k = json.dumps(r.get("id"))
        if k in recs:
            sys.exit(f"    {p}: id {k} written twice")
        recs[k] = r["ids"]
    return recs
a, b = load(sys.argv[1]), load(sys.argv[2])
opts = sys.argv[3:]
partial = "partial" in opts
count = next((int(o[6:]) for o in opts if o.startswith("count=")), None)
if count is not None and len(a) != count:
    sys.exit(f"    {len(a)} records in the reference, wanted {count}")
if not partial and set(a) != set(b):
    sys.exit(f"    record sets differ: {len(a)} vs {len(b)} records; missing {sorted(set(a) - set(b))[:5]}")
bad = [k for k in b if k not in a or a[k] != b[k]]
for k in bad[:3]:
    x, y = a.get(k, []), b[k]
    i = next((j for j, (u, v) in enumerate(zip(x, y)) if u != v), min(len(x), len(y)))
    print(f"    id {k}: first difference at token {i}: {x[i:i+5]} vs {y[i:i+5]}")
sys.exit(1 if bad else 0)
PY
}
