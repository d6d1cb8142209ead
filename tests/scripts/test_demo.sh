#!/usr/bin/env bash
# The README's main job (launch/demo.sh) end to end with few tokens: it must finish, print its three parts, and
# every strategy row must say its ids equal plain decoding's. Skips (77) when SmolLM2 is not installed.
# labels: cli;smollm2
# timeout: 600
set -u
BUILD=$1; SRC=$2; SHARED=$3
MODEL=${LOOKAHEAD_DEPS:-$HOME/.cache/lookahead}/models/SmolLM2-135M-Instruct
if [ ! -f "$MODEL/model.safetensors" ]; then
  echo "SKIP: $MODEL is not installed (launch/setup.sh converts it)"; exit 77
fi
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
fails=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }
if LOOKAHEAD_BIN="$BUILD/lookahead" LOOKAHEAD_SHARED="$SHARED" N=6 THREADS=1 bash "$SRC/launch/demo.sh" >"$T/out" 2>&1; then
  ok "demo.sh finished"
else
  bad "demo.sh failed"; tail -20 "$T/out" | sed 's/^/    /'
fi
for part in "== 1. Chat" "== 2. Every strategy" "== 3. TinyStories" "First story"; do
  grep -q "$part" "$T/out" && ok "printed '$part'" || bad "missing '$part'"
done
rows=$(grep -cE " (yes|NO)$" "$T/out")
[ "$rows" -ge 9 ] && ok "$rows strategy rows" || bad "only $rows strategy rows (want 9)"
grep -qE " NO$" "$T/out" && bad "a strategy's ids differ from plain decoding" || ok "every row lossless"
[ $fails -eq 0 ] && echo "demo: all checks passed" || echo "demo: $fails check(s) failed"
[ $fails -eq 0 ]
