#!/usr/bin/env bash
# The README's main job (launch/demo.sh) end to end with few tokens and one round: it must finish, print its three
# parts, and every strategy and task row must say its ids equal plain decoding's. The ratio rule of part 2 (a ratio
# only outside plain decoding's run-to-run spread, `~1.0` otherwise) is checked on made-up rounds. Skips (77)
# when SmolLM2 is not installed.
# labels: cli;smollm2
# timeout: 600
set -u
BUILD=$1; SRC=$2; SHARED=$3
fails=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }
# The ratio rule, without a model: (median ratio, per-round ratios, spread) -> printed text.
if out=$(python3 - "$SRC/launch" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
from demo_measure import fmt_ratio
cases = [((1.30, [1.25, 1.30, 1.35], 0.10), "1.30"),   # outside the spread, every round above 1
         ((1.05, [1.02, 1.05, 1.08], 0.10), "~1.0"),   # inside the spread
         ((1.30, [0.95, 1.30, 1.40], 0.10), "~1.0"),   # one round on the other side of 1
         ((0.70, [0.65, 0.70, 0.75], 0.10), "0.70"),   # slower, outside the spread
         ((1.30, [1.30], None), "~1.0")]               # one round: no spread measured
bad = [(a, want, fmt_ratio(*a)) for a, want in cases if fmt_ratio(*a) != want]
print("ratio rule:", "ok" if not bad else bad)
sys.exit(1 if bad else 0)
PY
); then ok "$out"; else bad "$out"; fi

MODEL=${LOOKAHEAD_DEPS:-$HOME/.cache/lookahead}/models/SmolLM2-135M-Instruct.gguf  # the demo's model (a link)
if [ ! -s "$MODEL" ]; then
  [ $fails -eq 0 ] || exit 1
  echo "SKIP: $MODEL is not installed (launch/setup.sh links the wheel's GGUF there)"; exit 77
fi
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
if LOOKAHEAD_BIN="$BUILD/lookahead" N=6 N2=4 ROUNDS=1 N3=6 bash "$SRC/launch/demo.sh" >"$T/out" 2>&1; then
  ok "demo.sh finished"
else
  bad "demo.sh failed"; tail -20 "$T/out" | sed 's/^/    /'
fi
for part in "== 1. Chat" "== 2. Every strategy" "== 3. Where drafting pays" "S over the first" "^demo: [0-9]* s"; do
  grep -q "$part" "$T/out" && ok "printed '$part'" || bad "missing '$part'"
done
rows=$(grep -cE " (yes|NO)$" "$T/out")
[ "$rows" -ge 10 ] && ok "$rows strategy and task rows" || bad "only $rows strategy and task rows (want 4 + 6)"
grep -qE " NO$" "$T/out" && bad "a strategy's ids differ from plain decoding" || ok "every row lossless"
# One round measures no spread: no ratio but plain decoding's own may be printed.
grep -A6 "^strategy " "$T/out" | grep -vE "^(strategy|ar) " | grep -qE " [0-9]+\.[0-9]+ +[0-9]+\.[0-9]+ +[0-9]\.[0-9]{2}  " \
  && bad "a ratio was printed without a measured spread" || ok "no ratio without a spread"
[ $fails -eq 0 ] && echo "demo: all checks passed" || echo "demo: $fails check(s) failed"
[ $fails -eq 0 ]
