#!/usr/bin/env bash
# Runs lookahead on K MPI ranks (lookahead parallelism: one model replica per rank, rank 0 drives).
#
#   launch/mpirun.sh -np K [mpirun options --] lookahead-args...
#   launch/mpirun.sh -np 4 generate --model ../shared/models/stories260K --prompt 'Once' --strategy lade
#   launch/mpirun.sh -np 16 --hostfile hosts -- generate --model DIR --device cuda --input p.jsonl --output o.jsonl
#
# What it adds to mpirun (each only when you did not pass your own):
#   - OMPI_ALLOW_RUN_AS_ROOT(_CONFIRM)=1 when run as root;
#   - --oversubscribe and --bind-to none when K exceeds this machine's cores;
#   - CPU runs on one node: --map-by slot:PE=<cores/K> --bind-to core, OMP_NUM_THREADS=<cores/K>;
#   - GPU nodes: one GPU per rank (local rank i gets the i-th visible GPU through CUDA_VISIBLE_DEVICES, so every
#     rank sees exactly one device, index 0), --map-by ppr:<K/sockets>:socket --bind-to socket when K is a multiple
#     of the socket count (ranks next to their GPUs on DGX-style nodes), else --bind-to none;
#   - -x for OMP_NUM_THREADS, PATH, LD_LIBRARY_PATH and every LA_*, LOOKAHEAD_*, NCCL_*, CUDA_* variable set
#     (remote ranks get the same environment).
# Environment: LOOKAHEAD_BIN (default: <repo>/build/lookahead), LA_BIND_GPU=0 to leave CUDA_VISIBLE_DEVICES alone,
# MPIRUN (default: mpirun), LA_LAUNCH_QUIET=1 to not echo the mpirun command line to stderr, LA_ABORT_GRACE (10 s:
# on multi-node jobs, how long mpirun may keep waiting for an unreachable node after the job failed; see below),
# LA_START_TIMEOUT (60 s: on multi-node jobs, how long every rank may take to start; see below). The job ends
# non-zero, naming the rank, if any rank fails or dies.
# SIGTERM / SIGINT to this script stop the job cleanly (forwarded to mpirun); the script then exits 143 / 130.
#
# Internal: `launch/mpirun.sh --rank-exec PROGRAM ARGS...` runs on every rank (also from srun, see cluster/): it
# binds the GPU from the local rank (OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID, PMIX_LOCAL_RANK, MPI_LOCALRANKID)
# and execs PROGRAM.
set -euo pipefail
SELF=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")
ROOT=$(cd "$(dirname "$SELF")/.." && pwd)

gpu_count() {
  if [ -n "${LA_GPU_COUNT:-}" ]; then echo "$LA_GPU_COUNT"; return; fi
  if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true
  else
    echo 0
  fi
}

if [ "${1:-}" = "--rank-exec" ]; then
  shift
  [ $# -ge 1 ] || { echo "mpirun.sh --rank-exec: no program" >&2; exit 2; }
  local_rank=${OMPI_COMM_WORLD_LOCAL_RANK:-${SLURM_LOCALID:-${PMIX_LOCAL_RANK:-${MPI_LOCALRANKID:-0}}}}
  if [ "${LA_BIND_GPU:-1}" != 0 ]; then
    if [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then
      IFS=, read -r -a gpus <<< "$CUDA_VISIBLE_DEVICES"
    else
      n=$(gpu_count)
      gpus=()
      for ((i = 0; i < n; i++)); do gpus+=("$i"); done
    fi
    if [ ${#gpus[@]} -gt 1 ]; then
      export CUDA_VISIBLE_DEVICES=${gpus[$((local_rank % ${#gpus[@]}))]}
    fi
  fi
  # A multi-node job's start-up watch (below): the line reaches mpirun.sh's stderr filter, which keeps it back.
  [ "${LA_START_MARK:-0}" = 1 ] && echo "[mpirun.sh] rank-started ${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-?}} $(hostname)" >&2
  exec "$@"
fi

usage() {
  sed -n '2,6p' "$SELF" | sed 's/^# \{0,1\}//' >&2
  exit 2
}
np=""
case "${1:-}" in
  -np|-n|--np) np=${2:-}; shift 2 || usage ;;
  *) usage ;;
esac
[[ "$np" =~ ^[1-9][0-9]*$ ]] || { echo "mpirun.sh: -np needs a positive rank count (got '$np')" >&2; exit 2; }

user_opts=()
args=("$@")
for ((i = 0; i < $#; i++)); do
  if [ "${args[$i]}" = "--" ]; then
    user_opts=("${args[@]:0:$i}")
    args=("${args[@]:$((i + 1))}")
    break
  fi
done
[ ${#args[@]} -ge 1 ] || usage

BIN=${LOOKAHEAD_BIN:-$ROOT/build/lookahead}
[ -x "$BIN" ] || { echo "mpirun.sh: $BIN is not built (run launch/setup.sh, or set LOOKAHEAD_BIN)" >&2; exit 2; }
MPIRUN=${MPIRUN:-mpirun}
command -v "$MPIRUN" >/dev/null 2>&1 || { echo "mpirun.sh: $MPIRUN not found (apt-get install openmpi-bin)" >&2; exit 2; }

if [ "$(id -u)" = 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi

has_opt() {  # has_opt NAME...: did the user pass one of these mpirun options?
  local o n
  for o in "${user_opts[@]}"; do
    for n in "$@"; do
      [[ "$o" == "$n" || "$o" == "$n="* ]] && return 0
    done
  done
  return 1
}

cores=$(getconf _NPROCESSORS_ONLN)
multinode=0
if has_opt --hostfile -hostfile --machinefile -machinefile --host -host -H --default-hostfile; then multinode=1; fi
if [ -n "${SLURM_JOB_NUM_NODES:-}" ] && [ "${SLURM_JOB_NUM_NODES}" -gt 1 ]; then multinode=1; fi
gpus=$(gpu_count)
[ "${LA_BIND_GPU:-1}" = 0 ] && gpus=0
sockets=$(lscpu 2>/dev/null | awk -F: '/^Socket\(s\)/ {gsub(/ /, "", $2); print $2}')
[[ "$sockets" =~ ^[1-9][0-9]*$ ]] || sockets=1

auto=()
per_node=$np
if [ $multinode = 0 ] && [ "$np" -gt "$cores" ]; then
  has_opt --oversubscribe -oversubscribe || auto+=(--oversubscribe)
  has_opt --bind-to -bind-to || auto+=(--bind-to none)
  threads=1
elif has_opt --bind-to -bind-to --map-by -map-by --rank-by -rank-by; then
  threads=$(( cores / per_node > 0 ? cores / per_node : 1 ))
elif [ "$gpus" -gt 0 ]; then
  if [ $multinode = 0 ] && [ $((np % sockets)) = 0 ] && [ "$np" -ge "$sockets" ]; then
    auto+=(--map-by "ppr:$((np / sockets)):socket" --bind-to socket)
  else
    auto+=(--bind-to none)
  fi
  threads=$(( cores / per_node > 0 ? cores / per_node : 1 ))
elif [ $multinode = 0 ]; then
  pe=$(( cores / np ))
  auto+=(--map-by "slot:PE=$pe" --bind-to core)
  threads=$pe
else
  auto+=(--bind-to none)
  threads=1
fi
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$threads}

grace=${LA_ABORT_GRACE:-10}
[[ "$grace" =~ ^[0-9]+$ ]] || { echo "mpirun.sh: LA_ABORT_GRACE must be whole seconds (got '$grace')" >&2; exit 2; }
start_limit=${LA_START_TIMEOUT:-60}
[[ "$start_limit" =~ ^[0-9]+$ ]] || { echo "mpirun.sh: LA_START_TIMEOUT must be whole seconds (got '$start_limit')" >&2; exit 2; }
watch=0
if [ $multinode = 1 ] && { [ "$grace" -gt 0 ] || [ "$start_limit" -gt 0 ]; }; then watch=1; fi
[ $watch = 1 ] && [ "$start_limit" -gt 0 ] && export LA_START_MARK=1
envs=(-x OMP_NUM_THREADS -x PATH)
[ -n "${LD_LIBRARY_PATH:-}" ] && envs+=(-x LD_LIBRARY_PATH)
while IFS='=' read -r name _; do
  case "$name" in
    LA_*|LOOKAHEAD_*|NCCL_*|CUDA_*) envs+=(-x "$name") ;;
  esac
done < <(env)

cmd=("$MPIRUN" -np "$np" "${auto[@]}" "${envs[@]}" "${user_opts[@]}" "$SELF" --rank-exec "$BIN" "${args[@]}")
[ "${LA_LAUNCH_QUIET:-0}" = 1 ] || echo "[mpirun.sh] ${cmd[*]}" >&2
# Signals: SIGTERM/SIGINT sent to this script go to mpirun, which sends the ranks SIGCONT, then SIGTERM 1 s later
# (odls_base_sigkill_timeout) and SIGKILL 1 s after that; lookahead's ranks stop cleanly within that second
# (generate --help, "Batch jobs"). mpirun itself then exits 1, so this script exits 128 + signal (130 / 143) as
# the binary does. (A terminal's Ctrl-C reaches mpirun directly too; a second SIGINT only makes it print a note.)
# Several nodes: a rank's error or MPI_Abort normally ends the job within a second, but when a node is unreachable
# (cable pulled, switch port down) mpirun waits for that node's daemon to confirm its ranks are gone, and the TCP
# connection to it only gives up after the kernel's retransmission limit (net.ipv4.tcp_retries2: ~15 min). So on
# multi-node jobs this script watches mpirun's stderr, and LA_ABORT_GRACE seconds (default 10; 0: never) after
# a "[rank R] error" line or Open MPI's MPI_ABORT notice it ends a mpirun that is still waiting (exit 1).
# Start-up: a node's daemon (orted) that dies before it reports to mpirun, e.g. when it cannot connect back, leaves
# mpirun waiting for it forever, without a word (the remote shell that started it exited 0; Open MPI 4.1's
# orte_startup_timeout does not cover it). So every rank announces itself (the rank-started line of --rank-exec,
# before the binary loads anything; kept out of the output) and LA_START_TIMEOUT seconds (default 60; 0: never)
# after the launch, a job whose ranks have not all started ends (exit 1), naming the ranks that did.
flag=""
if [ $watch = 1 ]; then
  flag=$(mktemp -d "${TMPDIR:-/tmp}/la-mpirun-watch.XXXXXX")
  trap 'rm -rf "$flag"' EXIT
  # The filter ignores INT/TERM: it must outlive mpirun's last line (a dead reader would SIGPIPE mpirun).
  "${cmd[@]}" 2> >(trap '' INT TERM
                   while IFS= read -r line; do
                     case "$line" in
                       *"[mpirun.sh] rank-started "*)  # (also behind --tag-output's prefix)
                         printf '%s\n' "${line#*\[mpirun.sh\] rank-started }" >> "$flag/started"; continue ;;
                     esac
                     printf '%s\n' "$line" >&2
                     case "$line" in *"] error: "*|*"MPI_ABORT was invoked"*) [ -e "$flag/failed" ] || date +%s > "$flag/failed" ;; esac
                   done) &
else
  "${cmd[@]}" &
fi
child=$!
sig=0
trap 'sig=15; kill -TERM "$child" 2>/dev/null' TERM
trap 'sig=2; kill -INT "$child" 2>/dev/null' INT
rc=0
# end_mpirun WHY...: the watch below gives up on a mpirun that is still waiting: says why, ends it, exits 1.
end_mpirun() {
  echo "[mpirun.sh] $*" >&2
  kill -TERM "$child" 2>/dev/null; sleep 2; kill -KILL "$child" 2>/dev/null
  wait "$child" 2>/dev/null
  exit 1
}
if [ -n "$flag" ]; then
  t_launch=$(date +%s)
  while kill -0 "$child" 2>/dev/null; do
    if [ "$grace" -gt 0 ] && [ -s "$flag/failed" ] && [ $(( $(date +%s) - $(cat "$flag/failed") )) -ge "$grace" ]; then
      end_mpirun "the job failed ${grace} s ago (see the error above) but mpirun is still waiting, most likely" \
                 "for a node it cannot reach: ending mpirun (its ranks there end when they lose contact)"
    fi
    if [ "$start_limit" -gt 0 ] && [ -n "$t_launch" ] && [ $(( $(date +%s) - t_launch )) -ge "$start_limit" ]; then
      n=0; [ -f "$flag/started" ] && n=$(wc -l < "$flag/started")
      if [ "$n" -ge "$np" ]; then
        t_launch=""  # all started: nothing more to watch here
      else
        # (Open MPI starts no rank before every node's daemon has reported: then none has started.)
        started=""
        [ "$n" -gt 0 ] && started=$(sort -n "$flag/started" | awk '{printf "%s%s on %s", (NR > 1 ? ", " : ""), "rank " $1, $2}')
        end_mpirun "only $n of $np ranks started within ${start_limit} s (LA_START_TIMEOUT)${started:+: $started};" \
                   "mpirun is still waiting, most likely for a node whose Open MPI daemon died at start or cannot" \
                   "reach this node: ending mpirun"
      fi
    fi
    sleep 0.25
  done
fi
while :; do
  wait "$child" && rc=0 || rc=$?
  kill -0 "$child" 2>/dev/null || break  # wait returned for a trapped signal: keep waiting
done
[ "$sig" != 0 ] && [ "$rc" != 0 ] && exit $((128 + sig))  # a job that still finished keeps its 0
exit "$rc"
