#!/usr/bin/env bash
# A process started by hand (no mpirun/srun environment) runs on the single-process communicator and never
# initialises MPI (stats: comm.backend "local", comm.mpi_initialized false), with the same ids as before. Negative
# control where mpirun exists: the same command under `mpirun -np 1` does use MPI, so the check can fail.
# labels: cli
# timeout: 300
set -u
BUILD=$1; SRC=$2; SHARED=$3
BIN=$BUILD/lookahead
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
head -n 3 "$SHARED/datasets/tinystories/prompts.jsonl" > "$T/p.jsonl"
fails=0; n=0
check() { n=$((n+1)); if eval "$2"; then echo "ok: $1"; else echo "FAIL: $1"; fails=$((fails+1)); fi; }
# Strip every launcher variable the detection knows (as if started from a plain shell).
clean=(env -u OMPI_COMM_WORLD_SIZE -u OMPI_COMM_WORLD_RANK -u OMPI_COMM_WORLD_LOCAL_RANK -u PMIX_RANK -u PMI_RANK
       -u PMI_SIZE -u SLURM_STEP_NUM_TASKS -u SLURM_PROCID -u SLURM_NTASKS)
args=(generate --model "$SHARED/models/stories260K" --input "$T/p.jsonl" --max-new-tokens 24 -q)
comm_of() { python3 -c "import json; c=json.load(open('$1'))['comm']; print(c['backend'], c['mpi_initialized'])"; }

"${clean[@]}" "$BIN" "${args[@]}" --strategy ar --output "$T/ar.jsonl" --stats-json "$T/ar.json"; rc=$?
check "plain run exits 0 (rc=$rc)" "[ $rc -eq 0 ]"
check "plain run: local communicator, MPI never initialised ($(comm_of "$T/ar.json"))" \
  "[ \"$(comm_of "$T/ar.json")\" = 'local False' ]"
"${clean[@]}" "$BIN" "${args[@]}" --strategy lade --output "$T/lade.jsonl" --stats-json "$T/lade.json"
check "lade on the local communicator: ids == ar" "python3 -c \"import json,sys; a=sorted((json.dumps(json.loads(l)['id']), json.loads(l)['ids']) for l in open('$T/ar.jsonl')); b=sorted((json.dumps(json.loads(l)['id']), json.loads(l)['ids']) for l in open('$T/lade.jsonl')); sys.exit(a!=b)\""
check "lade: local communicator ($(comm_of "$T/lade.json"))" "[ \"$(comm_of "$T/lade.json")\" = 'local False' ]"
# mpirun-only features give a clear error in a single process.
"${clean[@]}" "$BIN" "${args[@]}" --comm nccl --output "$T/x.jsonl" 2>"$T/err"; rc=$?
check "--comm nccl in one process: one clear error ($(head -c 120 "$T/err"))" \
  "[ $rc -ne 0 ] && [ $rc -lt 128 ] && [ \$(grep -c . '$T/err') = 1 ] && grep -q nccl '$T/err'"

mpi_build=$(python3 -c "import json; print(json.load(open('$T/ar.json'))['comm']['mpi_build'])")
if [ "$mpi_build" = True ] && command -v mpirun >/dev/null; then
  [ "$(id -u)" = 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  timeout 120 mpirun -np 1 --oversubscribe "$BIN" "${args[@]}" --strategy ar --output "$T/m.jsonl" \
    --stats-json "$T/m.json" >/dev/null 2>&1
  check "negative control: under mpirun -np 1 MPI is used ($(comm_of "$T/m.json" 2>/dev/null))" \
    "[ \"$(comm_of "$T/m.json" 2>/dev/null)\" = 'mpi True' ]"
  check "mpirun -np 1 ids == plain" "cmp -s <(python3 -c \"import json; [print(x) for x in sorted((json.dumps(json.loads(l)['id']), json.loads(l)['ids']) for l in open('$T/ar.jsonl'))]\") <(python3 -c \"import json; [print(x) for x in sorted((json.dumps(json.loads(l)['id']), json.loads(l)['ids']) for l in open('$T/m.jsonl'))]\")"
else
  echo "skip: negative control (no MPI in this build or no mpirun)"
fi
echo "$((n-fails)) passed, $fails failed"
[ $fails -eq 0 ]
