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
# Needs root (namespaces); skips (77) when namespaces cannot be made. LA_MULTIHOST_KEEP=1 keeps the work dir.
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
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }
now() { date +%s.%N; }
elapsed() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$1" "$2"; }

# mpi_hosts NP LOOKAHEAD-ARGS...: a job of NP ranks, one per host (A, B, C), mpirun on host A, through
# launch/mpirun.sh (as a user would), TCP between the hosts only; killed after MH_TIMEOUT (120) s.
MPIOPTS=(--hostfile "$T/hostfile" --mca plm_rsh_agent "$HERE/ns-rsh" --mca plm_rsh_no_tree_spawn 1
         --mca btl tcp,self --mca btl_tcp_if_include eth0 --mca oob_tcp_if_include eth0)
mpi_hosts() {
  local np=$1; shift
  LOOKAHEAD_BIN=$T/la-where LA_LAUNCH_QUIET=1 timeout "${MH_TIMEOUT:-120}" "$NS" run "$PFX" "$A" "$SRC/launch/mpirun.sh" -np "$np" \
    "${MPIOPTS[@]}" -- "$@"
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
for name in lade trie prompt-lookup ouroboros sampled-lade; do
  read -r -a extra <<<"${CASE[$name]}"
  if ! "$BIN" "${G[@]}" "${extra[@]}" --output "$T/$name.ref.jsonl" >"$T/log" 2>&1; then
    bad "$name: one-process run failed"; sed 's/^/    /' "$T/log" | tail -n 5; continue
  fi
  for np in 2 3; do
    out=$T/$name.k$np.jsonl
    mpi_hosts "$np" "${G[@]}" "${extra[@]}" --comm mpi --output "$out" >"$T/log" 2>&1
    rc=$?
    if [ $rc != 0 ]; then bad "$name on $np hosts: exit $rc"; sed 's/^/    /' "$T/log" | tail -n 8
    elif ! where_ok "$np"; then bad "$name on $np hosts: the ranks did not run one per host"
    elif same_ids "$T/$name.ref.jsonl" "$out" 4; then ok "$name on $np hosts: ids equal one process (4 prompts)"
    else bad "$name on $np hosts: ids differ from one process"; fi
  done
done
echo "(LP equivalence across hosts: $(elapsed "$t_eq" "$(now)") s)"

[ $fails = 0 ] && echo "PASS" || echo "$fails failure(s)"
[ $fails = 0 ]
