#!/usr/bin/env bash
# Lookahead parallelism across hosts: three hosts made of network namespaces on this machine (own addresses on a
# private bridge, tests/scripts/multihost/netns-hosts.sh), one MPI rank per host, Open MPI starting the remote
# ranks through an rsh agent that enters the host's namespace (tests/scripts/multihost/ns-rsh), TCP only
# (btl tcp,self and oob over the hosts' eth0: no shared memory between ranks).
#   1. LP on 2 and 3 hosts gives the ids of one process: lade, trie, prompt-lookup, ouroboros, sampled lade.
#   2. Faults across the network (see the section): a worker's cable pulled mid-job, packet loss, a host's
#      processes killed: the job ends within the limit naming rank and host, the records so far are valid JSONL,
#      the trie state is saved, --resume completes to the records of an uninterrupted run.
#   3. Per-step collective latency across the hosts with added link delay (multihost/linkem.c).
#   4. cluster/multinode.sbatch on a two-node Slurm (one slurmd per namespace host).
# The hosts share this machine's cores: these runs show correctness and latency, never speed-up.
# Needs root (namespaces); skips (77) when namespaces cannot be made. LA_MULTIHOST_KEEP=1 keeps the work dir;
# LA_MULTIHOST_SECTIONS=equal,faults,latency,slurm runs only those sections.
# labels: multihost;mpi
# timeout: 600
set -u
BUILD=$1; SRC=$2; SHARED=$3
BIN=$BUILD/lookahead
M=$SHARED/models/stories260K
DM=$SHARED/models/llama2xs
P=$SHARED/datasets/tinystories/prompts.jsonl
HERE=$SRC/tests/scripts/multihost
NS=$HERE/netns-hosts.sh
skip() { echo "SKIP: $*"; exit 77; }
[ -x "$BIN" ] || skip "$BIN is not built"
[ -d "$M" ] && [ -d "$DM" ] && [ -f "$P" ] || skip "shared models or prompts missing ($M, $DM, $P)"
command -v mpirun >/dev/null 2>&1 || skip "mpirun not installed"
command -v ip >/dev/null 2>&1 || skip "ip (iproute2) not installed"
command -v unshare >/dev/null 2>&1 || skip "unshare (util-linux) not installed"
command -v python3 >/dev/null 2>&1 || skip "python3 not installed"
[ "$(id -u)" = 0 ] || skip "network namespaces need root (run as root)"
"$BIN" generate --help 2>&1 | grep -q -- "--comm" || skip "lookahead generate has no --comm option"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1

PFX=lh$(printf '%04x' $(($$ % 65536)))  # namespaces ${PFX}a..c, bridge ${PFX}br: unique per run
SUB=10.213.0
A=${PFX}a; B=${PFX}b; C=${PFX}c
T=$(mktemp -d /tmp/la-multihost.XXXXXX)
chmod 755 "$T"
JOB=""
cleanup() {
  [ -n "$JOB" ] && kill -9 "$JOB" 2>/dev/null
  "$NS" down "$PFX" >/dev/null 2>&1
  [ "${LA_MULTIHOST_KEEP:-0}" = 1 ] && echo "kept $T" || rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 143' TERM INT HUP
if ! err=$("$NS" up "$PFX" "$SUB" 3 2>&1); then
  skip "cannot make network-namespace hosts here (ip netns / veth / bridge): $(head -c 300 <<<"$err")"
fi
printf '%s slots=1\n' "$A" "$B" "$C" > "$T/hostfile"
echo "hosts: $A $SUB.1, $B $SUB.2, $C $SUB.3 on bridge ${PFX}br"

fails=0
SECTIONS=${LA_MULTIHOST_SECTIONS:-equal,faults,latency,slurm}  # a subset, for work on one of them
want() { [[ ",$SECTIONS," == *",$1,"* ]]; }
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }
now() { date +%s.%N; }
elapsed() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$1" "$2"; }

# mpi_hosts NP LOOKAHEAD-ARGS...: a job of NP ranks, one per host (A, B, C), mpirun on host A, through
# launch/mpirun.sh (as a user would), TCP between the hosts only; killed after MH_TIMEOUT (120) s.
# A job whose ranks did not all start within MH_START (20) s (launch/mpirun.sh's LA_START_TIMEOUT: an Open MPI
# daemon died at start, before it reported to mpirun) is launched once more, noted at the end (MH_RETRY=0: not):
# under load, on these namespace hosts, a host's daemon sometimes vanished without a word right after the
# previous job on it was killed, and mpirun waited for it (the --resume after a pulled cable: once in CI; here
# in 3 of 8 runs of the faults section with two busy processes beside it, in none of 10 without them).
MPIOPTS=(--hostfile "$T/hostfile" --mca plm_rsh_agent "$HERE/ns-rsh" --mca plm_rsh_no_tree_spawn 1
         --mca btl tcp,self --mca btl_tcp_if_include eth0 --mca oob_tcp_if_include eth0)
mpi_hosts() {
  local np=$1 try rc err=$T/mh-err.$BASHPID; shift
  for try in 1 2; do
    LOOKAHEAD_BIN=$T/la-where LA_LAUNCH_QUIET=1 LA_START_TIMEOUT=${MH_START:-20} timeout "${MH_TIMEOUT:-120}" \
      "$NS" run "$PFX" "$A" "$SRC/launch/mpirun.sh" -np "$np" "${MPIOPTS[@]}" -- "$@" 2>"$err"
    rc=$?
    if [ $rc != 0 ] && [ $try = 1 ] && [ "${MH_RETRY:-1}" = 1 ] && grep -q "ranks started within" "$err"; then
      echo "note: a job's ranks did not all start, launched again: $(grep -m1 'ranks started within' "$err" | head -c 160)" >> "$T/notes"
      rm -f "$T/where.log"
      continue
    fi
    break
  done
  cat "$err" >&2; rm -f "$err"
  return $rc
}
# Every rank notes where it runs (rank, hostname, network namespace) before it becomes lookahead, so the test
# can check that rank i really ran on host i.
cat > "$T/la-where" <<EOF
#!/bin/sh
echo "\$OMPI_COMM_WORLD_RANK \$(hostname) \$(ip netns identify \$\$)" >> "$T/where.log"
exec "$BIN" "\$@"
EOF
chmod +x "$T/la-where"
where_ok() {  # where_ok NP: the last job's ranks 0..NP-1 ran on hosts A, B, C in order, each in its namespace
  local want got
  want=$(for ((i = 0; i < $1; i++)); do h=$(sed -n "$((i + 1))p" "$T/hostfile" | cut -d' ' -f1); echo "$i $h $h"; done)
  got=$(sort -n "$T/where.log" 2>/dev/null)
  rm -f "$T/where.log"
  [ "$want" = "$got" ] || { echo "    ranks ran at: $(tr '\n' ';' <<<"$got") wanted: $(tr '\n' ';' <<<"$want")"; return 1; }
}

# same_ids A B [N]: the two JSONL files hold the same records (id -> ids), N of them if given.
same_ids() {
  python3 - "$@" <<'PY'
import json, sys
def load(p):
    return {json.dumps(r["id"]): r["ids"] for r in map(json.loads, filter(str.strip, open(p)))}
a, b = load(sys.argv[1]), load(sys.argv[2])
if len(sys.argv) > 3 and len(a) != int(sys.argv[3]):
    print(f"    {len(a)} records, wanted {sys.argv[3]}"); sys.exit(1)
if set(a) != set(b):
    print(f"    record sets differ: {len(a)} vs {len(b)} records"); sys.exit(1)
bad = [k for k in a if a[k] != b[k]]
for k in bad[:3]:
    i = next((j for j, (x, y) in enumerate(zip(a[k], b[k])) if x != y), min(len(a[k]), len(b[k])))
    print(f"    id {k}: first difference at token {i}: {a[k][i:i+5]} vs {b[k][i:i+5]}")
sys.exit(1 if bad else 0)
PY
}

# ---- 1. LP across hosts equals one process ----
awk 'NR % 150 == 1' "$P" | head -n 4 > "$T/prompts.jsonl"
G=(generate --model "$M" --input "$T/prompts.jsonl" --max-new-tokens 24 --quiet --threads 1 --adaptive off)
declare -A CASE=(
  [lade]="--strategy lade --window 7 --ngram 4 --guesses 7"
  [trie]="--strategy trie --decoding-length 24"
  [prompt-lookup]="--strategy prompt-lookup"
  [ouroboros]="--strategy ouroboros --draft-model $DM --gamma 6 --extensions 2"
  [sampled-lade]="--strategy lade --window 7 --ngram 4 --guesses 7 --temperature 0.8 --top-p 0.9 --seed 7"
)
t_eq=$(now)
want equal && for name in lade trie prompt-lookup ouroboros sampled-lade; do
  read -r -a extra <<<"${CASE[$name]}"
  if ! "$BIN" "${G[@]}" "${extra[@]}" --output "$T/$name.ref.jsonl" >"$T/log" 2>&1; then
    bad "$name: one-process run failed"; sed 's/^/    /' "$T/log" | tail -n 5; continue
  fi
  for np in 2 3; do
    out=$T/$name.k$np.jsonl
    mpi_hosts "$np" "${G[@]}" "${extra[@]}" --comm mpi --lp-size "$np" --output "$out" >"$T/log" 2>&1
    rc=$?
    if [ $rc != 0 ]; then bad "$name on $np hosts: exit $rc"; sed 's/^/    /' "$T/log" | tail -n 8
    elif ! where_ok "$np"; then bad "$name on $np hosts: the ranks did not run one per host"
    elif same_ids "$T/$name.ref.jsonl" "$out" 4; then ok "$name on $np hosts: ids equal one process (4 prompts)"
    else bad "$name on $np hosts: ids differ from one process"; fi
  done
done
echo "(LP equivalence across hosts: $(elapsed "$t_eq" "$(now)") s)"

# ---- 2. Faults across the network ----
# A long trie job on 3 hosts (--rank-timeout 5, --trie-state); once rank 0 has written records, a fault hits
# host C (rank 2) or host B (rank 1). The job must end within LIMIT s of the fault, non-zero, its messages naming
# the rank and the host; the records so far must be valid JSONL, the trie state file written; then --resume on
# the mended hosts must complete to exactly the records of one uninterrupted process.
RT=5
LIMIT=$((RT + 10))     # rank-timeout, then launch/mpirun.sh's LA_ABORT_GRACE (3 here) and the teardown
export LA_ABORT_GRACE=3
# 48 prompts: each fault comes once 2 records are written, and the job runs on until it notices (a killed host's
# ranks: 17-20 more records in runs here); the continued job after it must still have 2 of its own to write (with
# 24 prompts it sometimes had none left: "the job ended before the fault").
NMANY=48
head -n $NMANY "$P" > "$T/many.jsonl"
F=(generate --model "$M" --input "$T/many.jsonl" --max-new-tokens 24 --quiet --threads 1 --adaptive off
   --strategy trie --decoding-length 24 --comm mpi)
"$BIN" generate --model "$M" --input "$T/many.jsonl" --max-new-tokens 24 --quiet --threads 1 --adaptive off \
  --strategy trie --decoding-length 24 --output "$T/many.ref.jsonl" >"$T/log" 2>&1 \
  || { bad "faults: the uninterrupted one-process run failed"; sed 's/^/    /' "$T/log" | tail -n 5; }
LINKEM=""
if cc -O2 -o "$T/linkem" "$HERE/linkem.c" 2>"$T/cc.log"; then LINKEM=$T/linkem
else echo "note: cannot compile multihost/linkem.c ($(head -c 200 "$T/cc.log")): no loss or delay tests"; fi

valid_jsonl() {  # valid_jsonl FILE: every line a JSON record with id and ids
  python3 - "$1" <<'PY'
import json, sys
n = 0
for line in open(sys.argv[1]):
    r = json.loads(line); assert "id" in r and "ids" in r; n += 1
print(n)
PY
}

# fault NAME ACTION NEEDLE [lossy|continue]: run the job, do ACTION (a shell command) once 2 records are written,
# time the end. CONTINUE: the job is a --resume of the last fault's output and trie state (which it must load), and
# the fault comes once it has written 2 records of its own. A LOSSY link slows the job without stopping it, and it ends only when one step stalls for --rank-timeout
# (TCP's retransmission backoff; --rank-timeout 2 for this one): then the time that counts is from the last
# record written (LIMIT + 15 s: the request in flight may have crawled for a while), and finishing with the right
# records is fine too.
fault() {
  local name=$1 action=$2 needle=$3 lossy=${4:-} out=$T/fault.jsonl state=$T/fault.trie more=() start=0
  if [ "$lossy" = continue ]; then more=(--resume); start=$(wc -l < "$out"); else rm -f "$out" "$state"; fi
  local rt=$RT; [ "$lossy" = lossy ] && rt=2  # a stall of 2 s comes sooner than one of 5 s under loss
  mpi_hosts 3 "${F[@]}" --lp-size 3 --rank-timeout "$rt" --output "$out" --trie-state "$state" "${more[@]}" >"$T/out" 2>"$T/err" &
  JOB=$!
  local i
  for ((i = 0; i < 600; i++)); do
    [ -s "$out" ] && [ "$(wc -l < "$out")" -ge $((start + 2)) ] && break
    kill -0 "$JOB" 2>/dev/null || break
    sleep 0.1
  done
  if ! kill -0 "$JOB" 2>/dev/null; then
    bad "$name: the job ended before the fault"; sed 's/^/    /' "$T/err" | tail -n 8; JOB=""; return
  fi
  local t0 t1 rc n
  t0=$(now); eval "$action"
  wait "$JOB"; rc=$?; t1=$(now); JOB=""
  local secs lim=$LIMIT; secs=$(elapsed "$t0" "$t1")
  echo "    $name: exit $rc $secs s after the fault; $(grep -E -m1 -- "$needle" "$T/err" | head -c 200)"
  if [ "$lossy" = lossy ] && [ "$rc" != 0 ]; then
    echo "    ($(valid_jsonl "$out" 2>/dev/null) records by then; the last $(elapsed "$(stat -c %Y "$out")" "$t1") s before the end)"
    secs=$(elapsed "$(stat -c %Y "$out")" "$t1"); lim=$((LIMIT + 15))
  fi
  if [ "$rc" = 0 ]; then
    if same_ids "$T/many.ref.jsonl" "$out" $NMANY; then ok "$name: the job rode it out (TCP retransmits) and its $NMANY records equal one process"
    else bad "$name: the job finished but its records differ from one process"; fi
    return
  fi
  if python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) <= $lim else 1)" "$secs"; then :
  else bad "$name: took $secs s to end (limit $lim s)"; fi
  grep -qE -- "$needle" "$T/err" || { bad "$name: no message matching /$needle/"; sed 's/^/    /' "$T/err" | grep -v setpgid | tail -n 12; }
  if n=$(valid_jsonl "$out" 2>"$T/verr"); then ok "$name: ended in $secs s, message as above; $n records so far, valid JSONL"
  else bad "$name: the records written are not valid JSONL: $(tail -n 1 "$T/verr")"; fi
  # Rank 0 saves the trie after every finished request (Strategy::checkpoint), so the state file is there even
  # when rank 0 itself is killed inside Open MPI's abort (a killed host: no exit hook then), and it loads: a
  # one-process run with a copy of it (it saves on exit) must start.
  if [ -s "$state" ] && cp "$state" "$T/probe.trie" && "$BIN" generate --model "$M" --prompt "Once" \
       --max-new-tokens 1 --quiet --threads 1 --strategy trie --trie-state "$T/probe.trie" >/dev/null 2>"$T/lerr"; then
    ok "$name: trie state saved ($(stat -c %s "$state") bytes) and loadable"
  elif [ -s "$state" ]; then bad "$name: the trie state file does not load: $(head -c 200 "$T/lerr")"
  else bad "$name: no trie state saved"; fi
}

# resume NAME: mend everything, --resume on 3 hosts, compare with the uninterrupted run.
resume() {
  local name=$1 out=$T/fault.jsonl state=$T/fault.trie
  mpi_hosts 3 "${F[@]}" --lp-size 3 --rank-timeout "$RT" --output "$out" --trie-state "$state" --resume >"$T/log" 2>&1
  local rc=$?
  if [ $rc != 0 ]; then bad "$name: --resume run failed (exit $rc)"; sed 's/^/    /' "$T/log" | grep -v setpgid | tail -n 8
  elif same_ids "$T/many.ref.jsonl" "$out" $NMANY; then ok "$name: --resume completed to the $NMANY records of one uninterrupted process"
  else bad "$name: the resumed records differ from one uninterrupted process"; sed 's/^/    /' "$T/log" | grep -v setpgid | tail -n 8; fi
}
# Processes left on a host the job lost (on a real cluster they end when they notice the lost contact).
reap() { local pid; for pid in $(ip netns pids "$1" 2>/dev/null); do kill -9 "$pid" 2>/dev/null; done; }
# SIGKILL to rank 0 (the lookahead process on host A; mpirun there lives on): no handler, no exit hook runs, so
# the trie state can only come from the checkpoints after each finished request.
kill_rank0() {
  local pid
  for pid in $(ip netns pids "$A" 2>/dev/null); do
    [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = lookahead ] && kill -9 "$pid" 2>/dev/null
  done
}

t_f=$(now)
if want faults; then
# An Open MPI daemon that dies at start without a word (ns-rsh's LA_NSRSH_LOSE: the remote shell exits 0 and
# starts nothing on host C): mpirun alone would wait for it forever (and starts no rank until every daemon has
# reported); launch/mpirun.sh ends the job once LA_START_TIMEOUT (here 6 s) has passed.
t0=$(now)
LA_NSRSH_LOSE=$C MH_START=6 MH_RETRY=0 MH_TIMEOUT=40 mpi_hosts 3 generate --model "$M" --prompt "Once" \
  --max-new-tokens 4 --quiet --threads 1 --comm mpi --lp-size 3 >"$T/out" 2>"$T/err"
rc=$?; secs=$(elapsed "$t0" "$(now)")
msg=$(grep -m1 "ranks started within" "$T/err")
echo "    a daemon lost at start on host $C: exit $rc after $secs s; $(head -c 220 <<<"$msg")"
if [ $rc = 124 ]; then bad "a daemon lost at start: the job hung (killed after 40 s)"
elif [ $rc = 0 ]; then bad "a daemon lost at start: the job exited 0"
elif [[ "$msg" != *"only 0 of 3 ranks started within 6 s"* ]]; then
  bad "a daemon lost at start: no message saying how many ranks started"; grep -v setpgid "$T/err" | sed 's/^/    /' | tail -n 8
else ok "a daemon lost at start on host $C: ended in $secs s (exit $rc), message as above"; fi
rm -f "$T/where.log"

fault "cable of host $C pulled mid-job" "\"$NS\" cut \"$PFX\" \"$C\"" "rank\(s\) 2 on host $C"
"$NS" mend "$PFX" "$C"; reap "$C"; sleep 0.5
resume "cable of host $C pulled"

fault "all processes of host $B killed mid-job" "reap \"$B\"" "rank\(s\) 1 on host $B|Peer host: +$B"
# The --resume of that job (loading its trie state), then rank 0 itself killed mid-job.
fault "rank 0 (host $A) killed with SIGKILL mid-job" "kill_rank0" "rank 0 .*on node $A" continue
resume "processes of host $B, then rank 0 on host $A killed"

if [ -n "$LINKEM" ]; then
  echo "0 0" > "$T/ctl"
  "$NS" impair "$PFX" "$C" "$LINKEM" "$T/ctl"
  fault "30% packet loss on host $C's link mid-job" \
    "echo '0 0.3' > \"$T/ctl\"; kill -HUP \$(cat /run/lookahead-netns/$C/linkem.pid)" "rank\(s\) 2 on host $C within 2 s" lossy
  echo "0 0" > "$T/ctl"; kill -HUP "$(cat /run/lookahead-netns/$C/linkem.pid)"; reap "$C"
  [ -s "$T/fault.jsonl" ] && [ "$(wc -l < "$T/fault.jsonl")" -lt $NMANY ] && resume "30% packet loss"
  "$NS" plain "$PFX" "$C"
fi
fi
echo "(faults: $(elapsed "$t_f" "$(now)") s)"

# ---- 3. Per-step collective latency across hosts ----
# 2 ranks: rank 0 on host A, rank 1 on host B, whose cable goes through linkem with a one-way delay D each way
# (so a step's scatter + gather round trip gains 2D); D = 0, 50, 500 us, plus the plain veth cable. Per run, from
# --stats-json "dist" (as launch/strong-scaling.sh measures it): L = (broadcast_s + forward_rank0_s +
# gather_wait_s - max_forward_s) / steps: rank 0's time per step in the scatter and the wait beyond the slowest
# forward. One run each; with LA_MULTIHOST_LATENCY_DIR (measuring for the docs) the best of 2 for D = 0 and
# 500 us (L is reported, not checked: one run covers the test). LA_MULTIHOST_LATENCY_DIR=DIR keeps the stats
# files (for strong-scaling.sh --latency-from). Reported, not checked (see below); checked: the link's own delay,
# the fastest UDP round trip (multihost/udp_rtt.py) is at least 2D (and, for D = 500 us, under 2D + 2 ms).
lat_run() {  # lat_run TAG N: N runs, prints the smallest L (us) and keeps that run's stats as $T/lat-TAG.json
  local tag=$1 best="" v r
  for ((r = 1; r <= $2; r++)); do
    mpi_hosts 2 generate --model "$M" --prompt "Once upon a time, there was a little" --strategy lade \
      --window 7 --ngram 4 --guesses 7 --adaptive off --max-new-tokens 64 --quiet --threads 1 --comm mpi \
      --stats-json "$T/lat-$tag-$r.json" >"$T/log" 2>&1 || { sed 's/^/    /' "$T/log" | tail -n 5 >&2; continue; }
    v=$(python3 -c "
import json,sys; d=json.load(open(sys.argv[1]))['dist']
print(f\"{(d['broadcast_s'] + d['forward_rank0_s'] + d['gather_wait_s'] - d['max_forward_s']) / d['steps'] * 1e6:.1f}\")" \
      "$T/lat-$tag-$r.json")
    if [ -z "$best" ] || python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) < float(sys.argv[2]) else 1)" "$v" "$best"; then
      best=$v; cp "$T/lat-$tag-$r.json" "$T/lat-$tag.json"
    fi
  done
  echo "$best"
}
t_l=$(now)
if want latency; then
  declare -A LAT=()
  LAT[veth]=$(lat_run veth 1)
  if [ -n "$LINKEM" ]; then
    echo "0 0" > "$T/ctl"
    "$NS" impair "$PFX" "$B" "$LINKEM" "$T/ctl"
    declare -A RTT=()
    "$NS" run "$PFX" "$B" python3 "$HERE/udp_rtt.py" echo 7777 & local_echo=$!
    for d in 0 50 500; do
      echo "$d 0" > "$T/ctl"; kill -HUP "$(cat "/run/lookahead-netns/$B/linkem.pid")"
      sleep 0.2
      RTT[$d]=$("$NS" run "$PFX" "$A" python3 "$HERE/udp_rtt.py" ping "$SUB.2" 7777 100)
      LAT[$d]=$(lat_run "d$d" "$([ "$d" != 50 ] && [ -n "${LA_MULTIHOST_LATENCY_DIR:-}" ] && echo 2 || echo 1)")
    done
    kill "$local_echo" 2>/dev/null; wait "$local_echo" 2>/dev/null
    "$NS" plain "$PFX" "$B"
  fi
  [ -n "$LINKEM" ] && echo "    UDP round trips A <-> B (min median, us): D=0: ${RTT[0]:-?}; D=50us: ${RTT[50]:-?}; D=500us: ${RTT[500]:-?}"
  echo "    per-step collective latency, 2 ranks on hosts $A and $B (us): plain veth ${LAT[veth]:-?};" \
       "through linkem: D=0 ${LAT[0]:-?}, D=50us ${LAT[50]:-?}, D=500us ${LAT[500]:-?}"
  if [ -n "${LATDIR:=${LA_MULTIHOST_LATENCY_DIR:-}}" ]; then
    mkdir -p "$LATDIR"; cp "$T"/lat-veth.json "$T"/lat-d*.json "$LATDIR"/ 2>/dev/null
    for k in veth 0 50 500; do echo "$k ${LAT[$k]:-}"; done > "$LATDIR/latency-us.txt"
  fi
  [ -n "${LAT[veth]}" ] || bad "latency: the 2-host runs failed"
  # L is not checked against D: at this machine's load, scheduling noise per step (milliseconds) can hide even
  # the 1 ms that D = 500 us adds. The link itself is checked: the fastest of 100 UDP round trips A <-> B.
  if [ -n "$LINKEM" ]; then
    for d in 0 500; do
      if [ -z "${RTT[$d]:-}" ]; then bad "latency: no UDP round trips through linkem with D=$d us"; continue; fi
      read -r lo med <<<"${RTT[$d]}"
      if [ "$lo" -ge $((2 * d)) ] && { [ "$d" = 0 ] || [ "$lo" -le $((2 * d + 2000)) ]; }; then
        ok "latency: UDP round trip through linkem with D=$d us each way: min $lo us, median $med us"
      else bad "latency: UDP round trip with D=$d us: min $lo us, not in [$((2 * d)), $((2 * d + 2000))] us"; fi
    done
  fi
fi
echo "(latency: $(elapsed "$t_l" "$(now)") s)"

# ---- 4. cluster/multinode.sbatch on a two-node Slurm ----
# munged (root namespace, private key and socket), slurmctld on host A, one slurmd per host (A and B) in its
# namespace with its own hostname, NodeAddr = the host's address; a fake GRES of 8 GPUs per node (no devices) so
# the template's --gpus-per-node=8 is satisfiable; the CPU run overrides tasks and CPUs on the sbatch line and
# sets LA_DEVICE=cpu LA_DTYPE=fp32. MPI inside the job: srun --mpi=pmix, TCP over eth0 (OMPI_MCA_* exported).
SLURM_PIDS=()
slurm_stop() {
  local pid
  for pid in "${SLURM_PIDS[@]}"; do kill "$pid" 2>/dev/null; done
  sleep 0.5
  for pid in "${SLURM_PIDS[@]}"; do kill -9 "$pid" 2>/dev/null; done
  SLURM_PIDS=()
}
trap 'slurm_stop; cleanup' EXIT
slurm_section() {
  local c
  for c in slurmctld slurmd munged sbatch squeue scontrol srun; do
    command -v $c >/dev/null 2>&1 || { echo "SKIP (slurm part): $c is not installed (launch/setup.sh installs slurm-wlm and munge for the tests)"; return; }
  done
  local S=$T/slurm
  mkdir -p "$S/munge" "$S/state" "$S/spool" "$S/log" "$S/results"
  chmod 700 "$S/munge"
  dd if=/dev/urandom of="$S/munge/munge.key" bs=128 count=1 2>/dev/null
  chmod 400 "$S/munge/munge.key"
  munged -f --socket="$S/munge/munge.sock" --key-file="$S/munge/munge.key" --pid-file="$S/munge/munged.pid" \
    --seed-file="$S/munge/seed" --log-file="$S/log/munged.log" || { bad "slurm: munged did not start"; return; }
  SLURM_PIDS+=("$(cat "$S/munge/munged.pid")")
  chmod 755 "$S/munge"
  export SLURM_CONF=$S/slurm.conf
  cat > "$SLURM_CONF" <<EOF
ClusterName=multihost
SlurmctldHost=$A($SUB.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=6917
SlurmdPort=6918
AuthType=auth/munge
AuthInfo=socket=$S/munge/munge.sock
CredType=cred/munge
StateSaveLocation=$S/state
SlurmdSpoolDir=$S/spool/%n
SlurmctldPidFile=$S/slurmctld.pid
SlurmdPidFile=$S/slurmd-%n.pid
SlurmctldLogFile=$S/log/slurmctld.log
SlurmdLogFile=$S/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
JobCompType=jobcomp/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MinJobAge=600
NodeName=$A NodeAddr=$SUB.1 CPUs=2 State=UNKNOWN
NodeName=$B NodeAddr=$SUB.2 CPUs=2 State=UNKNOWN
PartitionName=hosts Nodes=$A,$B Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOF
  mkdir -p "$S/spool/$A" "$S/spool/$B"
  LA_NS_CGROUP=1 "$NS" run "$PFX" "$A" slurmctld -c || { bad "slurm: slurmctld did not start"; return; }
  sleep 0.3; SLURM_PIDS+=("$(cat "$S/slurmctld.pid" 2>/dev/null)")
  local h
  for h in "$A" "$B"; do
    # The "nodes" share /tmp, where Slurm's PMIx plugin makes a per-step directory of a fixed name: each slurmd
    # reads its own copy of slurm.conf with an mpi.conf beside it that moves that directory.
    mkdir -p "$S/conf-$h" "$S/pmix-$h"
    cp "$SLURM_CONF" "$S/conf-$h/slurm.conf"
    echo "PMIxCliTmpDirBase=$S/pmix-$h" > "$S/conf-$h/mpi.conf"
    SLURM_CONF=$S/conf-$h/slurm.conf LA_NS_CGROUP=1 "$NS" run "$PFX" "$h" slurmd -N "$h" \
      || { bad "slurm: slurmd on $h did not start"; return; }
    sleep 0.3; SLURM_PIDS+=("$(cat "$S/slurmd-$h.pid" 2>/dev/null)")
  done
  local n
  for _ in $(seq 60); do
    n=$("$NS" run "$PFX" "$A" sinfo -h -N -o "%t" 2>/dev/null | grep -c idle)
    [ "$n" = 2 ] && break; sleep 0.5
  done
  if [ "$n" != 2 ]; then
    bad "slurm: the two nodes did not become idle: $("$NS" run "$PFX" "$A" sinfo -N 2>&1 | tr '\n' ';')"
    for f in "$S"/log/*.log; do echo "--- $f"; tail -n 8 "$f"; done
    return
  fi
  echo "    slurm: slurmctld on $A, slurmd on $A ($SUB.1) and $B ($SUB.2): both idle"
  head -n 4 "$P" > "$S/prompts.jsonl"
  "$BIN" generate --model "$M" --input "$S/prompts.jsonl" --max-new-tokens 24 --quiet --threads 1 --strategy lade \
    --output "$S/ref.jsonl" >"$T/log" 2>&1 || { bad "slurm: one-process reference failed"; return; }
  local id state out=$S/results/multinode.jsonl
  id=$(cd "$SRC" && "$NS" run "$PFX" "$A" env LA_REPO="$SRC" LA_BIN="$BIN" LA_MODEL="$M" LA_INPUT="$S/prompts.jsonl" \
       LA_OUT="$out" LA_DEVICE=cpu LA_DTYPE=fp32 LA_MAX_NEW=24 LA_ARGS="--threads 1" OMPI_MCA_btl=tcp,self \
       OMPI_MCA_btl_tcp_if_include=eth0 OMPI_MCA_oob_tcp_if_include=eth0 \
       sbatch --parsable --ntasks-per-node=1 --cpus-per-task=1 --gpus-per-node=0 --output="$S/job-%j.out" cluster/multinode.sbatch 2>"$T/sb.err") \
    || { bad "slurm: sbatch cluster/multinode.sbatch refused: $(cat "$T/sb.err")"; return; }
  for _ in $(seq 240); do  # 120 s
    [ -z "$("$NS" run "$PFX" "$A" squeue -h -j "$id" 2>/dev/null)" ] && break; sleep 0.5
  done
  state=$("$NS" run "$PFX" "$A" scontrol show job "$id" 2>/dev/null | grep -oE "JobState=[A-Z_]+|ExitCode=[0-9:]+| NodeList=[^( ][^ ]*" | tr '\n' ' ')
  if ! grep -q "JobState=COMPLETED" <<<"$state"; then
    bad "slurm: job $id did not complete: $state"; tail -n 60 "$S/job-$id.out" 2>/dev/null | sed 's/^/    /'
    "$NS" run "$PFX" "$A" scancel "$id" 2>/dev/null; return
  fi
  if same_ids "$S/ref.jsonl" "$out" 4; then
    ok "slurm: cluster/multinode.sbatch job $id ($state) on $A + $B: 4 records equal one process"
  else bad "slurm: job $id's records differ from one process"; fi
  grep -q "\[multinode\] job $id on " "$S/job-$id.out" && echo "    $(grep -m1 "\[multinode\] job" "$S/job-$id.out")"
}
t_s=$(now)
want slurm && slurm_section
slurm_stop
echo "(slurm: $(elapsed "$t_s" "$(now)") s)"

[ -s "$T/notes" ] && cat "$T/notes"
[ $fails = 0 ] && echo "PASS" || echo "$fails failure(s)"
[ $fails = 0 ]
