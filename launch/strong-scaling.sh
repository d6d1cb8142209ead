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
#                share them, so these are not W-device numbers)
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
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SHARED=$(cd "$ROOT/.." && pwd)/shared
BUILD=${LOOKAHEAD_BUILD:-$ROOT/build}
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
log() { echo "[strong-scaling] $*" >&2; }
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
    -h|--help) sed -n '2,49p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
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

# Python for the table and the plot: the setup venv's if it exists, else python3.
pick_python() {
  local v
  v=$(cat "$BUILD/.venv-path" 2>/dev/null || true)
  if [ -n "$v" ] && [ -x "$v/bin/python" ]; then
    # the chart needs matplotlib: pinned, installed into the setup venv once (launch/plot.py pins the same)
    "$v/bin/python" -c 'import matplotlib' 2>/dev/null || "$v/bin/python" -m pip install -q matplotlib==3.11.2 >&2 || true
    echo "$v/bin/python"
  else command -v python3; fi
}

ANALYZE=$(cat <<'PYEOF'
import csv, json, math, os, sys
mode = sys.argv[1]

def draw(rows, png, title):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception as e:
        print(f"PNG not written: matplotlib unavailable ({e}); the CSV holds the table", file=sys.stderr)
        return False
    styles = {"modelled": ("tab:blue", "o", "-"), "measured-seq": ("tab:gray", "s", ":"),
              "measured-mpi": ("tab:red", "^", "--")}
    labels = {"modelled": "modelled: K devices (slowest replica + latency)",
              "measured-seq": "measured: simulation, K forwards in sequence on 1 device",
              "measured-mpi": "measured: real K-rank MPI job on this machine (shared cores/GPU)"}
    fig, ax = plt.subplots(1, 3, figsize=(16, 5.2))
    for m in ["modelled", "measured-seq", "measured-mpi"]:
        rs = sorted([r for r in rows if r["mode"] == m and r["tokens_per_s"] not in ("", None)],
                    key=lambda r: int(r["K"]))
        if not rs:
            continue
        c, mk, ls = styles[m]
        ks = [int(r["K"]) for r in rs]
        ax[0].plot(ks, [float(r["tokens_per_s"]) for r in rs], color=c, marker=mk, ls=ls, label=labels[m])
        sp = [(int(r["K"]), float(r["speedup"])) for r in rs if r["speedup"] not in ("", "nan")]
        if sp:
            ax[1].plot([k for k, _ in sp], [v for _, v in sp], color=c, marker=mk, ls=ls, label=labels[m])
        ax[2].plot(ks, [float(r["step_ms"]) for r in rs], color=c, marker=mk, ls=ls, label=labels[m])
    allk = sorted({int(r["K"]) for r in rows})
    ax[1].plot(allk, [1.0] * len(allk), color="black", lw=0.8, ls="-", alpha=0.5)
    for a, t, y in [(ax[0], "tokens/s", "tokens / s"), (ax[1], "speedup over K=1 (same mode)", "speedup"),
                    (ax[2], "time per step", "ms / step")]:
        a.set_xscale("log", base=2)
        a.set_xticks(allk)
        a.set_xticklabels([str(k) for k in allk])
        a.set_xlabel("K (ranks / replicas)")
        a.set_ylabel(y)
        a.set_title(t)
        a.grid(True, alpha=0.3)
    ax[2].set_yscale("log")
    from matplotlib.ticker import FormatStrFormatter
    ax[2].yaxis.set_major_formatter(FormatStrFormatter("%g"))
    lo, hi = ax[2].get_ylim()
    if hi / lo < 8:  # within a decade: label the minor ticks too
        ax[2].yaxis.set_minor_formatter(FormatStrFormatter("%g"))
    h, l = ax[0].get_legend_handles_labels()
    fig.legend(h, l, loc="lower center", ncol=3, fontsize=9, frameon=False)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout(rect=(0, 0.08, 1, 0.95))
    fig.savefig(png, dpi=110)
    print(f"PNG: {png}")
    return True

def table(rows):
    cols = [("K", "K"), ("mode", "mode"), ("step_ms", "step ms"), ("S", "S"), ("tokens_per_s", "tokens/s"),
            ("speedup", "speedup"), ("plan", "plan tok"), ("tokens_per_rank", "tok/rank"), ("note", "note")]
    def fmt(k, v):
        if v in ("", None):
            return "-"
        if k in ("step_ms", "tokens_per_s"):
            v = float(v); return f"{v:.1f}" if v >= 10 else f"{v:.3f}"
        if k in ("S", "speedup", "tokens_per_rank", "plan"):
            return f"{float(v):.2f}"
        return str(v)
    cells = [[h for _, h in cols]] + [[fmt(k, r[k]) for k, _ in cols] for r in rows]
    w = [max(len(c[i]) for c in cells) for i in range(len(cols))]
    for j, c in enumerate(cells):
        print("  ".join(c[i].ljust(w[i]) if i in (1, 8) else c[i].rjust(w[i]) for i in range(len(cols))).rstrip())
        if j == 0:
            print("  ".join("-" * x for x in w))

if mode == "plot":
    csvp, png = sys.argv[2], sys.argv[3]
    rows = list(csv.DictReader(open(csvp)))
    table(rows)
    draw(rows, png, os.path.basename(csvp))
    sys.exit(0)

work, ks, cores, csvp, png, title = sys.argv[2], [int(k) for k in sys.argv[3].split(",")], int(sys.argv[4]), \
    sys.argv[5], sys.argv[6], sys.argv[7]
lat = float(sys.argv[8])
gpus = int(sys.argv[9])
device = sys.argv[10]

def load(p):
    try:
        return json.load(open(p))
    except Exception:
        return None

def ids(p):
    try:
        return [json.loads(l)["ids"] for l in open(p) if l.strip()]
    except Exception:
        return None

def adaptive_note(st):  # adaptive drafting: the most chosen draft budget and the plain-step share
    a = st.get("adaptive")
    if not a or not a.get("steps"):
        return ""
    b, n = max(a["budget_hist"].items(), key=lambda kv: kv[1])
    return f"; adaptive: budget {b} in {100 * n / a['steps']:.0f}% of steps, plain {100 * a['plain_fraction']:.0f}%"

rows, ref, lossless, checked = [], None, True, []
base = {}
for k in ks:
    sim = load(f"{work}/sim-{k}.json")
    if sim and "simulation" in sim:
        s, agg = sim["simulation"], sim["aggregate"]
        S = agg["compression"]
        for m, ms, tps in [("modelled", s["modelled_step_ms"], s["modelled_tokens_per_s"]),
                           ("measured-seq", s["measured_step_ms"], s["measured_tokens_per_s"])]:
            note = (f"max fwd {s['max_forward_ms_mean']:.1f} ms + L {s['collective_latency_us']:.0f} us"
                    if m == "modelled" and k > 1 else ("K fwds in sequence" if m == "measured-seq" and k > 1 else ""))
            if s.get("disagreements", 0):
                note += f" DISAGREEMENTS {s['disagreements']}"
            rows.append(dict(K=k, mode=m, step_ms=ms, S=S, tokens_per_s=tps, tokens_per_rank=s["mean_tokens_per_rank"],
                             plan=agg["step_tokens_per_step"], note=note + adaptive_note(sim)))
    real = load(f"{work}/real-{k}.json")
    if real:
        agg = real["aggregate"]
        d = real.get("dist")
        tpr = d["step_tokens"] / d["steps"] / k if d and d.get("steps") and "step_tokens" in d else \
            (agg["step_tokens_per_step"] if k == 1 else "")
        if k == 1:
            note = "1 process"
        else:
            note = f"MPI {k} ranks"
            if device == "cpu":
                note += f", {cores} cores" + (" oversubscribed" if k > cores else " shared")
            else:
                note += f", share {gpus} GPU" if gpus < k else ""
            if d:
                note += f", step - max fwd {(d['run_s'] - d['max_forward_s']) / max(d['steps'], 1) * 1e3:.2f} ms"
        rows.append(dict(K=k, mode="measured-mpi", step_ms=agg["seconds"] / max(agg["steps"], 1) * 1e3,
                         S=agg["compression"], tokens_per_s=agg["tokens_per_s"], tokens_per_rank=tpr,
                         plan=agg["step_tokens_per_step"], note=note + adaptive_note(real)))
    else:
        for what in ("skip", "failed"):
            if os.path.exists(f"{work}/real-{k}.{what}"):
                rows.append(dict(K=k, mode="measured-mpi", step_ms="", S="", tokens_per_s="", tokens_per_rank="", plan="",
                                 note=("skipped: " if what == "skip" else "failed: ") +
                                 open(f"{work}/real-{k}.{what}").read().strip()))
    for name in (f"sim-{k}", f"real-{k}"):
        if not os.path.exists(f"{work}/{name}.json"):  # no stats: the run did not finish
            continue
        o = ids(f"{work}/{name}.jsonl")
        if o is None:
            continue
        if ref is None:
            ref = (name, o)
        same = o == ref[1]
        lossless = lossless and same
        checked.append(f"{name}{'' if same else ' DIFFERS'}")
for r in rows:
    b = [x for x in rows if x["mode"] == r["mode"] and x["K"] == min(ks) and x["tokens_per_s"] not in ("", 0)]
    r["speedup"] = r["tokens_per_s"] / b[0]["tokens_per_s"] if b and r["tokens_per_s"] != "" else ""
order = {"modelled": 0, "measured-seq": 1, "measured-mpi": 2}
rows.sort(key=lambda r: (r["K"], order[r["mode"]]))
with open(csvp, "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=["K", "mode", "step_ms", "S", "tokens_per_s", "speedup", "plan", "tokens_per_rank",
                                      "note"])
    w.writeheader()
    for r in rows:
        w.writerow(r)
print(title)
table(rows)
print(f"lossless: {'yes' if lossless and ref else 'no'} (every run's output ids vs {ref[0] if ref else '-'}: "
      f"{', '.join(checked)})")
print(f"CSV: {csvp}")
draw(rows, png, title)
sys.exit(0 if lossless and ref else 1)
PYEOF
)

if [ -n "$PLOT_CSV" ]; then
  PY=$(pick_python)
  exec "$PY" -c "$ANALYZE" plot "$PLOT_CSV" "$OUTPNG"
fi

# ---- setup ----
if [ ! -x "$LA" ]; then
  log "building (launch/setup.sh)"
  "$ROOT/launch/setup.sh" || die "setup failed"
fi
grep -q -- "--simulate-ranks" <<<"$("$LA" generate --help 2>&1)" || die "$LA has no --simulate-ranks (rebuild)"
PY=$(pick_python)
if ! "$PY" -c "import matplotlib" 2>/dev/null; then
  log "installing matplotlib into $("$PY" -c 'import sys; print(sys.prefix)')"
  "$PY" -m pip install -q --disable-pip-version-check matplotlib >/dev/null 2>&1 ||
    log "could not install matplotlib: no PNG (the table and CSV are still written)"
fi
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
  rows=()
  LGEN=()  # without --quiet: rank 0's start-up line carries every layout's modelled job tokens/s (the logs keep it)
  for a in "${GEN[@]}"; do [ "$a" = --quiet ] || LGEN+=("$a"); done
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
  "$PY" - "$WORK/layout-ref.jsonl" "$OUTCSV" "$W" "$CORES" "${rows[@]}" <<'PYEOF'
import csv, json, re, sys
ref_path, csv_path, world, cores = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
# The modelled job tokens/s of every layout, from rank 0's start-up line of each run (src/cli/layout_model.cpp:
# the calibrated forward with the collective latency assumed there; groups of K > 1 with plain steps).
modelled = {}
def read_modelled(log):
    for line in open(log, errors="replace"):
        if "modelled job tokens/s by layout" in line:
            for m in re.finditer(r"(\d+x\d+): (\d+(?:\.\d+)?)", line.split(": ", 1)[1]):
                modelled.setdefault(m.group(1), float(m.group(2)))
load = lambda p: [json.loads(l) for l in open(p) if l.strip()]
ref = {json.dumps(r["id"]): r["ids"] for r in load(ref_path)}
def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))] if xs else float("nan")
out = []
print(f"layout sweep on {world} real rank(s) ({cores} core(s) here{'; oversubscribed' if world > cores else ''}):")
print(f"{'layout':>7} {'job tok/s':>10} {'modelled':>9} {'job s':>8} {'p50 req s':>10} {'p95 req s':>10} {'S':>6}  lossless")
for spec in sys.argv[5:]:
    name, path, t0, t1 = spec.split()
    read_modelled(path + ".log")
    recs = load(path)
    st = json.load(open(path + ".stats"))["aggregate"]
    toks = sum(r["new_tokens"] for r in recs)
    steps = sum(r["steps"] for r in recs)
    job_s = st["seconds"]
    lat = [r["seconds"] for r in recs]
    same = {json.dumps(r["id"]): r["ids"] for r in recs} == ref
    row = {"layout": name, "groups": name.split("x")[0], "ranks_per_group": name.split("x")[1],
           "job_tokens_per_s": round(toks / job_s, 2) if job_s > 0 else "", "job_seconds": round(job_s, 3),
           "p50_request_s": round(pct(lat, 0.5), 3), "p95_request_s": round(pct(lat, 0.95), 3),
           "S": round(toks / steps, 3) if steps else "", "wall_with_startup_s": round(float(t1) - float(t0), 2),
           "modelled_job_tokens_per_s": modelled.get(name, ""), "lossless": "yes" if same else "NO"}
    out.append(row)
    print(f"{name:>7} {row['job_tokens_per_s']:>10} {row['modelled_job_tokens_per_s']:>9} {row['job_seconds']:>8} {row['p50_request_s']:>10} "
          f"{row['p95_request_s']:>10} {row['S']:>6}  {row['lossless']}")
if out:
    with open(csv_path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(out[0]))
        w.writeheader()
        w.writerows(out)
    print(f"CSV: {csv_path}")
sys.exit(0 if all(r["lossless"] == "yes" for r in out) else 1)
PYEOF
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
  LATENCY=$("$PY" - "$LATFROM" <<'PYEOF'
import json, sys
best = None
for f in sys.argv[1].split(","):
    try:
        d = json.load(open(f))["dist"]
        v = (d["broadcast_s"] + d["forward_rank0_s"] + d["gather_wait_s"] - d["max_forward_s"]) / d["steps"] * 1e6
    except Exception as e:
        sys.exit(f"--latency-from {f}: not a --stats-json of a multi-rank job ({e!r})")
    best = v if best is None else min(best, v)
print(f"{best:.1f}")
PYEOF
) || die "--latency-from: no latency in '$LATFROM'"
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
NEED=$("$PY" - "$MODEL" "$DTYPE" <<'PYEOF'
import json, os, sys
m, dt = sys.argv[1], sys.argv[2]
presets = {"stories260k": (64, 172, 5, 8, 4, 512, 512, True), "llama2xs": (64, 192, 5, 8, 4, 512, 256, True),
           "tinyllama-1.1b": (2048, 5632, 22, 32, 4, 32000, 2048, False),
           "llama-2-7b": (4096, 11008, 32, 32, 32, 32000, 4096, False),
           "smollm2-360m": (960, 2560, 32, 15, 5, 49152, 8192, True),
           "llama-3.2-1b": (2048, 8192, 16, 32, 8, 128256, 131072, True),
           "qwen2-0.5b": (896, 4864, 24, 14, 2, 151936, 32768, True)}
rnd = m.startswith("random:")
try:
    if rnd:
        h, i, l, nh, kv, v, mp, tied = presets[m[7:].split(":")[0].lower()]
        hd = h // nh
    else:
        c = json.load(open(os.path.join(m, "config.json")))
        h, i, l, nh = c["hidden_size"], c["intermediate_size"], c["num_hidden_layers"], c["num_attention_heads"]
        kv, v, mp = c.get("num_key_value_heads", nh), c["vocab_size"], c.get("max_position_embeddings", 2048)
        tied, hd = c.get("tie_word_embeddings", False), c.get("head_dim") or h // nh
except Exception:
    print("0 0"); sys.exit()
p = v * h * (1 if tied else 2) + l * (h * nh * hd * 2 + 2 * h * kv * hd + 3 * h * i + 2 * h) + h
fused = l * (h * nh * hd + 2 * h * kv * hd + 2 * h * i)  # the loader keeps fused qkv and gate/up copies too
b = {"fp32": 4, "fp16": 2, "bf16": 2}[dt]
dev = (p + fused) * b + (mp + 256) * kv * hd * 2 * l * b
host = p * 4 if rnd else 0  # random weights are drawn in fp32 on the host first
print(int(dev), int(host))
PYEOF
)
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
"$PY" -c "$ANALYZE" run "$WORK" "$KS" "$CORES" "$OUTCSV" "$OUTPNG" "$TITLE" "$LATENCY" "$GPUS" "$DEVICE" || STATUS=1
echo "(modelled: K devices, step = slowest replica's forward + L; measured-seq: the simulation's wall, K forwards"
echo " in sequence on one device; measured-mpi: a real K-rank job on this machine. Speedup vs the same mode at K=1."
echo " Work files: $WORK)"
exit $STATUS
