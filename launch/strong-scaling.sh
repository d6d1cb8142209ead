#!/usr/bin/env bash
# Strong scaling of lookahead parallelism (LP): K = 1, 2, 4, 8 replicas on the same prompts. Prints one table
# (step ms, S = tokens per step, tokens/s, speedup over K=1, mean forward tokens per rank), writes it as CSV and
# draws it as a PNG, and checks that every run's output ids equal K=1's ("lossless: yes/no").
#
#   launch/strong-scaling.sh                                  # CPU: stories260K, fp32, lade, 8 prompts x 96 tokens
#   launch/strong-scaling.sh --model random:tinyllama-1.1b --num-prompts 2 --tokens 16
#   launch/strong-scaling.sh --device cuda --dtype fp16 --model random:tinyllama-1.1b    # the GPU machine
#   launch/strong-scaling.sh --device cuda --dtype fp16 --model random:llama-2-7b
#   launch/strong-scaling.sh --plot build/strong-scaling.csv [--out build/strong-scaling.png]   # PNG from a CSV
#
# Options: --model M (../shared/models/stories260K) --device cpu|cuda --dtype fp32|fp16|bf16 --strategy S (lade)
#   --prompts FILE (../shared/datasets/tinystories/prompts.jsonl) --num-prompts N (8) --tokens N (96)
#   --ks 1,2,4,8  --threads N (CPU threads per process, passed as --threads; default: libtorch's / mpirun.sh's)
#   --latency-us X (skip the measurement and use X)  --real auto|no (real MPI runs, default auto)
#   --latency-from STATS.json[,STATS.json...] (skip the measurement: L from these --stats-json files of real
#                 multi-rank jobs, e.g. across hosts (docs/hosts.md); the smallest per-step value of them)
#   --out PNG (build/strong-scaling.png; the CSV goes next to it, .csv)  --workdir DIR (kept; default a temp dir)
#   --reuse (with --workdir: keep the runs and the latency already there, run only what is missing)
#   --extra "ARGS" (more `lookahead generate` options, e.g. "--window 7 --guesses 7")
#   --layouts W (a batch job instead: W real ranks as every layout G x K, K dividing W (--lp-size K: G groups of
#                K ranks; 4 -> 4x1, 2x2, 1x4): job tokens/s, p50/p95 request seconds, S and "lossless" against
#                one process, as a table and CSV (--out's .csv). On a machine with fewer cores than W the ranks
#                share them, so these are not W-device numbers; the modelled figures use the link latency L
#                measured on the same W ranks first, or --latency-us / --latency-from, printed with the table)
#
# Rows (modes) per K:
#   modelled      K devices, from the simulation: `generate --simulate-ranks K` splits every step exactly as a
#                 K-rank job does (partition_plan), runs the K parts one after another on this one device (shared
#                 weights, one KV cache per replica), and times each part's forward. Model of one K-device step:
#                     step = max_r forward_r + L            (L = collective latency; none at K = 1)
#                 and of the whole run: measured wall - all replica work in sequence (prefill, forwards, commits)
#                 + per call the slowest replica's work + L per step (drafting, partitioning, merging and
#                 verification on rank 0 stay as measured).
#   measured-seq  the same simulation's own wall clock (the K forwards in sequence on one device).
#   measured-mpi  a real K-rank job (launch/mpirun.sh -np K) on this machine, where memory allows: on a
#                 machine with fewer cores/GPUs than K the ranks share them (noted: "oversubscribed", "share 1 GPU"),
#                 so these numbers are NOT K-device numbers. K = 1 is a plain one-process run.
#   Speedup = tokens/s over the same mode's K = 1. With --adaptive off S is the same for every K: LP splits the
#   step, not the plan. With adaptive drafting (the default) the draft controller costs a plan of T tokens as the
#   slowest of K parts of ~T/K plus L, so the plan (column "plan tok", tokens per step) grows with K and so does S.
#
# Collective latency L: measured here, unless --latency-us is given, with a real 2-rank MPI job on the CPU
# (stories260K, so the forwards are ~1 ms): from its --stats-json "dist" counters,
#     L = (broadcast_s + forward_rank0_s + gather_wait_s - max_forward_s) / steps
# i.e. per step, rank 0's time in the scatter of the parts plus the wait for the replies beyond the slowest
# forward: one RUN round trip of the real protocol. Best (smallest) of 5 runs (other load on the machine only
# adds to it). On a multi-GPU node the real
# transport is NCCL / another MPI path; pass its latency with --latency-us (e.g. from a real run's dist counters).
# On the GPU machine (one GPU) the measurement is MPI between two CPU processes on the same node.
set -uo pipefail
LA_NAME=strong-scaling
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"   # ROOT, BUILD, SHARED, VENV, log
LA=$BUILD/lookahead

MODEL=$SHARED/models/stories260K
DEVICE=cpu
DTYPE=fp32
STRATEGY=lade
PROMPTS=$SHARED/datasets/tinystories/prompts.jsonl
NPROMPTS=8
TOKENS=96
KS=1,2,4,8
THREADS=""
LATENCY=""
LATFROM=""
REAL=auto
OUTPNG=$BUILD/strong-scaling.png
WORK=""
EXTRA=""
PLOT_CSV=""
REUSE=0
LAYOUTS=""
die() { echo "strong-scaling.sh: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --model) MODEL=$2; shift 2 ;;
    --device) DEVICE=$2; shift 2 ;;
    --dtype) DTYPE=$2; shift 2 ;;
    --strategy) STRATEGY=$2; shift 2 ;;
    --prompts) PROMPTS=$2; shift 2 ;;
    --num-prompts) NPROMPTS=$2; shift 2 ;;
    --tokens) TOKENS=$2; shift 2 ;;
    --ks) KS=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --latency-us) LATENCY=$2; shift 2 ;;
    --latency-from) LATFROM=$2; shift 2 ;;
    --real) REAL=$2; shift 2 ;;
    --out) OUTPNG=$2; shift 2 ;;
    --workdir) WORK=$2; shift 2 ;;
    --extra) EXTRA=$2; shift 2 ;;
    --plot) PLOT_CSV=$2; shift 2 ;;
    --reuse) REUSE=1; shift ;;
    --layouts) LAYOUTS=$2; shift 2 ;;
    -h|--help) sed -n '2,50p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option '$1' (--help)" ;;
  esac
done
[[ "$NPROMPTS" =~ ^[1-9][0-9]*$ ]] || die "--num-prompts must be a positive integer"
[[ "$TOKENS" =~ ^[1-9][0-9]*$ ]] || die "--tokens must be a positive integer"
[[ "$KS" =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || die "--ks must be a comma list of rank counts"
[ -z "$LAYOUTS" ] || [[ "$LAYOUTS" =~ ^[1-9][0-9]*$ ]] || die "--layouts must be a number of ranks >= 1"
[ -z "$LATENCY" ] || [[ "$LATENCY" =~ ^[0-9]+([.][0-9]*)?$ ]] || die "--latency-us must be a number >= 0"
[ "$REAL" = auto ] || [ "$REAL" = no ] || die "--real must be auto or no"
case "$OUTPNG" in *.png) OUTCSV=${OUTPNG%.png}.csv ;; *) OUTCSV=$OUTPNG.csv ;; esac

# Python for the tables (launch/scaling.py) and the charts (launch/plot.py, which installs its pinned matplotlib on
# first use): the setup venv's if it exists, else python3.
pick_python() {
  if [ -x "$VENV/bin/python" ]; then echo "$VENV/bin/python"; else command -v python3; fi
}
SCALING=$ROOT/launch/scaling.py

if [ -n "$PLOT_CSV" ]; then
  PY=$(pick_python)
  exec "$PY" "$SCALING" plot "$PLOT_CSV" "$OUTPNG"
fi

# ---- setup ----
if [ ! -x "$LA" ]; then
  log "building (launch/setup.sh)"
  "$ROOT/launch/setup.sh" || die "setup failed"
fi
grep -q -- "--simulate-ranks" <<<"$("$LA" generate --help 2>&1)" || die "$LA has no --simulate-ranks (rebuild)"
PY=$(pick_python)
if [ -z "$WORK" ]; then WORK=$(mktemp -d /tmp/la-scaling-XXXXXX); fi
mkdir -p "$WORK" "$(dirname "$OUTPNG")"
# A private copy of the binary: a rebuild of build/lookahead during the runs cannot disturb them.
cp "$LA" "$WORK/lookahead.bin" && LA=$WORK/lookahead.bin
export LOOKAHEAD_BIN=$LA OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 LA_LAUNCH_QUIET=1
[ -f "$PROMPTS" ] || die "--prompts file '$PROMPTS' does not exist"
grep -v '^[[:space:]]*$' "$PROMPTS" | head -n "$NPROMPTS" > "$WORK/prompts.jsonl"
CORES=$(getconf _NPROCESSORS_ONLN)
GPUS=0
if [ "$DEVICE" = cuda ] && command -v nvidia-smi >/dev/null 2>&1; then GPUS=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true); fi
read -r -a EXTRA_ARGS <<< "$EXTRA"
GEN=(generate --model "$MODEL" --device "$DEVICE" --dtype "$DTYPE" --strategy "$STRATEGY" --input "$WORK/prompts.jsonl"
     --max-new-tokens "$TOKENS" --quiet "${EXTRA_ARGS[@]}")
[ -n "$THREADS" ] && GEN+=(--threads "$THREADS")

# ---- --layouts W: a batch job on W real ranks as every G x K (K dividing W; --lp-size K) ----
if [ -n "$LAYOUTS" ]; then
  W=$LAYOUTS
  log "layout sweep: $W rank(s), $(wc -l < "$WORK/prompts.jsonl") prompts x $TOKENS tokens, strategy $STRATEGY"
  "$LA" "${GEN[@]}" --output "$WORK/layout-ref.jsonl" --overwrite >"$WORK/layout-ref.log" 2>&1 ||
    die "the one-process reference run failed (see $WORK/layout-ref.log)"
  # The link latency L of the modelled figures (rank 0's layout line adds it to every step of a group of K > 1):
  # --latency-us / --latency-from, else measured on these W ranks: a one-request LP job over all W (--lp-size W,
  # the sweep's model, threads and strategy), L from its "dist" counters as below (one RUN round trip beyond the
  # slowest forward), the smallest of 3 runs. One rank has no link: 0.
  LSRC="--latency-us"
  if [ -n "$LATFROM" ]; then
    [ -z "$LATENCY" ] || die "give only one of --latency-us and --latency-from"
    LATENCY=$("$PY" "$SCALING" latency "$LATFROM") || die "--latency-from: no latency in '$LATFROM'"
    LSRC="--latency-from"
  elif [ -z "$LATENCY" ] && [ "$W" -gt 1 ]; then
    lat_files=(); LAT_GEN=(); prev=""
    head -n 1 "$WORK/prompts.jsonl" > "$WORK/link-latency-prompt.jsonl"
    for a in "${GEN[@]}"; do  # the sweep's command on its first prompt, 32 tokens
      case "$prev" in --input) a=$WORK/link-latency-prompt.jsonl ;; --max-new-tokens) a=32 ;; esac
      LAT_GEN+=("$a"); prev=$a
    done
    for rep in 1 2 3; do
      f=$WORK/link-latency-$rep.json
      if "$ROOT/launch/mpirun.sh" -np "$W" "${LAT_GEN[@]}" --lp-size "$W" --batch 1 \
          --output "$WORK/link-latency-$rep.jsonl" --overwrite --stats-json "$f" >"$WORK/link-latency-$rep.log" 2>&1; then
        lat_files+=("$f")
      else
        log "link latency run $rep failed ($WORK/link-latency-$rep.log)"
      fi
    done
    if [ ${#lat_files[@]} -gt 0 ] && LATENCY=$("$PY" "$SCALING" latency "$(IFS=,; echo "${lat_files[*]}")"); then
      LSRC="measured: best of ${#lat_files[@]} $W-rank LP run(s)"
    else
      LATENCY=0; LSRC="NOT measured (no working $W-rank LP run): 0"
    fi
  fi
  LATENCY=${LATENCY:-0}
  echo "$LATENCY" > "$WORK/latency-us"
  log "link latency L = $LATENCY us per step ($LSRC)"
  rows=()
  LGEN=()  # without --quiet: rank 0's start-up line carries every layout's modelled job tokens/s (the logs keep it)
  for a in "${GEN[@]}"; do [ "$a" = --quiet ] || LGEN+=("$a"); done
  LGEN+=(--collective-latency-us "$LATENCY")
  for ((k = 1; k <= W; k++)); do
    [ $((W % k)) = 0 ] || continue
    g=$((W / k)); out=$WORK/layout-${g}x$k.jsonl
    log "${g}x$k: $g group(s) of $k rank(s) (launch/mpirun.sh -np $W --lp-size $k)"
    t0=$(date +%s.%N)
    if [ "$W" = 1 ]; then
      "$LA" "${LGEN[@]}" --output "$out" --overwrite --stats-json "$out.stats" >"$out.log" 2>&1
    else
      "$ROOT/launch/mpirun.sh" -np "$W" "${LGEN[@]}" --lp-size "$k" --output "$out" --overwrite --stats-json "$out.stats" \
        >"$out.log" 2>&1
    fi || { log "${g}x$k failed (see $out.log)"; continue; }
    t1=$(date +%s.%N)
    rows+=("${g}x$k $out $t0 $t1")
  done
  "$PY" "$SCALING" layouts "$WORK/layout-ref.jsonl" "$OUTCSV" "$W" "$CORES" "$LATENCY" "${rows[@]}"
  rc=$?
  # The chart: measured and modelled job tokens/s per layout (launch/plot.py layouts).
  if [ $rc = 0 ] && [ -f "$OUTCSV" ] && [[ "$OUTPNG" == *.png ]]; then
    "$PY" "$ROOT/launch/plot.py" layouts "$OUTCSV" "$OUTPNG" || log "chart failed (the CSV is complete)"
  fi
  exit $rc
fi
log "work dir $WORK; model $MODEL ($DEVICE, $DTYPE), strategy $STRATEGY, $(wc -l < "$WORK/prompts.jsonl") prompts x $TOKENS tokens, K = $KS"

# ---- collective latency ----
if [ -n "$LATFROM" ]; then
  [ -z "$LATENCY" ] || die "give only one of --latency-us and --latency-from"
  LATENCY=$("$PY" "$SCALING" latency "$LATFROM") || die "--latency-from: no latency in '$LATFROM'"
  log "collective latency from $LATFROM: $LATENCY us per step"
fi
if [ -z "$LATENCY" ] && [ $REUSE = 1 ] && [ -s "$WORK/latency-us" ]; then LATENCY=$(cat "$WORK/latency-us"); fi
if [ -z "$LATENCY" ]; then
  LMODEL=$SHARED/models/stories260K
  [ -d "$LMODEL" ] || LMODEL=random:stories260k
  best=""
  for rep in 1 2 3 4 5; do
    if "$ROOT/launch/mpirun.sh" -np 2 generate --model "$LMODEL" --prompt "Once upon a time, there was a little" \
        --strategy "$STRATEGY" --max-new-tokens 64 --quiet --stats-json "$WORK/latency-$rep.json" \
        >"$WORK/latency-$rep.log" 2>&1; then
      v=$("$PY" -c "
import json,sys; d=json.load(open(sys.argv[1]))['dist']
print((d['broadcast_s'] + d['forward_rank0_s'] + d['gather_wait_s'] - d['max_forward_s']) / d['steps'] * 1e6)" \
        "$WORK/latency-$rep.json")
      log "collective latency, 2-rank MPI run $rep: $v us/step"
      if [ -z "$best" ] || "$PY" -c "import sys; sys.exit(0 if float(sys.argv[1]) < float(sys.argv[2]) else 1)" "$v" "$best"; then best=$v; fi
    else
      log "2-rank MPI latency run failed ($WORK/latency-$rep.log)"
    fi
  done
  if [ -z "$best" ]; then
    log "collective latency NOT measured (no working 2-rank MPI job): using 0"
    LATENCY=0
  else
    LATENCY=$(printf '%.1f' "$best")
  fi
fi
echo "$LATENCY" > "$WORK/latency-us"
log "collective latency L = $LATENCY us per step"

# ---- memory needed by K real replicas (weights + KV cache), to skip runs that cannot fit ----
NEED=$("$PY" "$SCALING" need "$MODEL" "$DTYPE")
read -r NEED_DEV NEED_HOST <<< "$NEED"
real_skip_reason() {  # real_skip_reason K: prints why a K-rank real run is skipped (nothing: run it)
  local k=$1 mem_avail gpu_free=0
  mem_avail=$(( $(awk '/MemAvailable/ {print $2}' /proc/meminfo) * 1024 ))
  if [ "$DEVICE" = cuda ] && [ "$GPUS" -gt 0 ]; then
    gpu_free=$(nvidia-smi --query-gpu=memory.free --format=csv,noheader,nounits -i 0 2>/dev/null | head -1)
    gpu_free=$(( ${gpu_free:-0} * 1024 * 1024 ))
  fi
  [ "$REAL" = no ] && { echo "--real no"; return; }
  [ "$k" -gt 1 ] && ! command -v mpirun >/dev/null 2>&1 && { echo "no mpirun"; return; }
  if [ "$DEVICE" = cpu ]; then
    local need=$(( k * (NEED_DEV > NEED_HOST ? NEED_DEV : NEED_HOST) ))
    [ "$need" -gt $(( mem_avail * 85 / 100 )) ] &&
      { echo "needs ~$((need >> 30)) GiB RAM for $k replicas, $((mem_avail >> 30)) GiB available"; return; }
  else
    local per=$(( GPUS > 0 ? (k + GPUS - 1) / GPUS : k ))
    [ $(( per * NEED_DEV )) -gt $(( gpu_free * 90 / 100 )) ] &&
      { echo "needs ~$(( per * NEED_DEV >> 30 )) GiB on one GPU for $per replicas, $((gpu_free >> 30)) GiB free"; return; }
    [ $(( k * NEED_HOST )) -gt $(( mem_avail * 85 / 100 )) ] &&
      { echo "needs ~$(( k * NEED_HOST >> 30 )) GiB host RAM to draw $k random replicas"; return; }
  fi
}

# ---- runs ----
STATUS=0
for k in ${KS//,/ }; do
  if [ $REUSE = 1 ] && [ -s "$WORK/sim-$k.json" ]; then
    log "K=$k: simulation kept from $WORK"
  else
    log "K=$k: simulation (one process, $k replicas in sequence)"
    t0=$(date +%s.%N)
    if ! "$LA" "${GEN[@]}" --simulate-ranks "$k" --collective-latency-us "$LATENCY" --output "$WORK/sim-$k.jsonl" --overwrite \
        --stats-json "$WORK/sim-$k.json" >"$WORK/sim-$k.log" 2>&1; then
      log "K=$k simulation failed:"; tail -5 "$WORK/sim-$k.log" >&2; STATUS=1
    fi
    log "K=$k: simulation took $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}') s"
  fi
  if [ $REUSE = 1 ] && [ -s "$WORK/real-$k.json" ]; then log "K=$k: real run kept from $WORK"; continue; fi
  rm -f "$WORK/real-$k.skip" "$WORK/real-$k.failed" "$WORK/real-$k.json" "$WORK/real-$k.jsonl"
  why=$(real_skip_reason "$k")
  if [ -n "$why" ]; then
    log "K=$k: real run skipped: $why"
    echo "$why" > "$WORK/real-$k.skip"
    continue
  fi
  if [ "$k" = 1 ]; then
    log "K=1: real run (one process)"
    "$LA" "${GEN[@]}" --output "$WORK/real-1.jsonl" --overwrite --stats-json "$WORK/real-1.json" >"$WORK/real-1.log" 2>&1 ||
      { log "K=1 real run failed:"; tail -5 "$WORK/real-1.log" >&2; echo "see real-1.log" > "$WORK/real-1.failed"; }
  else
    log "K=$k: real run (launch/mpirun.sh -np $k)"
    "$ROOT/launch/mpirun.sh" -np "$k" "${GEN[@]}" --lp-size "$k" --output "$WORK/real-$k.jsonl" --stats-json "$WORK/real-$k.json" \
      >"$WORK/real-$k.log" 2>&1 || { log "K=$k real run failed:"; tail -5 "$WORK/real-$k.log" >&2
                                     grep -q "signal 9" "$WORK/real-$k.log" && echo "killed (out of memory?)" > "$WORK/real-$k.failed"
                                     [ -f "$WORK/real-$k.failed" ] || echo "see real-$k.log" > "$WORK/real-$k.failed"; }
  fi
done

# ---- table, CSV, PNG, lossless check ----
TITLE="LP strong scaling: $(basename "$MODEL") ($DEVICE, $DTYPE), $STRATEGY, $(wc -l < "$WORK/prompts.jsonl") prompts x $TOKENS tokens, L = $LATENCY us/step, $CORES cores${GPUS:+, $GPUS GPU}"
[ "$GPUS" = 0 ] && TITLE="LP strong scaling: $(basename "$MODEL") ($DEVICE, $DTYPE), $STRATEGY, $(wc -l < "$WORK/prompts.jsonl") prompts x $TOKENS tokens, L = $LATENCY us/step, $CORES cores"
echo
"$PY" "$SCALING" run "$WORK" "$KS" "$CORES" "$OUTCSV" "$OUTPNG" "$TITLE" "$LATENCY" "$GPUS" "$DEVICE" || STATUS=1
echo "(modelled: K devices, step = slowest replica's forward + L; measured-seq: the simulation's wall, K forwards"
echo " in sequence on one device; measured-mpi: a real K-rank job on this machine. Speedup vs the same mode at K=1."
echo " Work files: $WORK)"
exit $STATUS
