#!/usr/bin/env bash
# What a step of T tokens costs, and a PNG of it relative to T = 1 (launch/plot.py forward).
#   launch/bench/bench-forward.sh                         # SmolLM2-135M-Instruct, CPU, one thread, METRIC=wall
#   METRIC=cpu launch/bench/bench-forward.sh              # on a machine shared with other work
#   MODEL=../shared/models/stories260K CONTEXT=128 launch/bench/bench-forward.sh
# METRIC=wall: `lookahead bench-forward --kernels both` (the default forward and the ATen reference on the same
#   weights) RUNS times; the chart takes the fastest time per T (the least disturbed).
# METRIC=cpu: wall time is meaningless on a loaded machine, so each T is timed on the decoding thread's CPU
#   clock instead: `generate --strategy jacobi --jacobi-block T-1 --adaptive off --threads 1` makes every step
#   exactly T tokens (the root and T-1 guesses) and --stats-json gives cpu_s / steps, with --kernels on and off,
#   on a CNN/DailyMail article prompt (about 150 tokens of context). Host work per step is included (microseconds).
# Env: MODEL (SmolLM2-135M-Instruct), TOKENS (1,2,4,8,16,32,64), CONTEXT (256, wall only), RUNS (3, wall only),
#      THREADS (1), METRIC (wall), OUT (build/): writes OUT/bench-forward.txt and OUT/step-cost.png.
set -euo pipefail
LA_NAME=bench-forward
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
export ROOT
export LOOKAHEAD_BIN=${LOOKAHEAD_BIN:-$ROOT/build/lookahead}
OUT=${OUT:-$ROOT/build}
MODEL=${MODEL:-SmolLM2-135M-Instruct}
TOKENS=${TOKENS:-1,2,4,8,16,32,64}
mkdir -p "$OUT"
{
  echo "$(la_machine), $(date -u +%F), metric ${METRIC:-wall}"
  if [ "${METRIC:-wall}" = cpu ]; then
    python3 - "$MODEL" "$TOKENS" "$SHARED" "${THREADS:-1}" <<'PY'
import os, sys, tempfile
sys.path.insert(0, os.path.join(os.environ.get("ROOT", "."), "launch", "bench"))
from bench_lib import prompts_file, run
model, tokens, shared, threads = sys.argv[1], [int(t) for t in sys.argv[2].split(",")], sys.argv[3], sys.argv[4]
tmp = tempfile.mkdtemp(prefix="la-stepcost-")
p = prompts_file("cnn-dm", 1, tmp, shared)
ms = {}
for k in ("on", "off"):
    for t in tokens:
        strat, opts = ("ar", []) if t == 1 else ("jacobi", ["--jacobi-block", str(t - 1)])
        st, _ = run(model, p, strat, 12, tmp, opts + ["--adaptive", "off", "--threads", threads, "--kernels", k],
                    label=f"{k}-{t}")
        a = st["aggregate"]
        ms[(k, t)] = 1e3 * a["cpu_s"] / max(1, a["steps"])
print(f"model {model} [fp32, cpu, cpu ms per step of the decoding thread]")
print(f"{'context':>8s} {'T':>7s} {'forward_ms':>13s} {'vs_T1':>11s} {'aten_ms':>13s} {'aten/kern':>11s}")
for t in tokens:
    on, off = ms[("on", t)], ms[("off", t)]
    print(f"{'~150':>8s} {t:7d} {on:13.3f} {on / ms[('on', tokens[0])]:11.2f} {off:13.3f} {off / on:11.2f}")
PY
  else
    # ATen's OpenMP threads would spin after each reference forward and steal the cores from the kernels' pool
    # in the interleaved timing: passive waiting keeps the two paths from disturbing each other.
    for r in $(seq "${RUNS:-3}"); do
      OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE} "$LOOKAHEAD_BIN" bench-forward --model "$MODEL" --threads "${THREADS:-1}" --kernels both --tokens "$TOKENS" \
        --context "${CONTEXT:-256}" "$@"
    done
  fi
} | tee "$OUT/bench-forward.txt"
"$(la_python)" "$ROOT/launch/plot.py" forward "$OUT/bench-forward.txt" "$OUT/step-cost.png"
