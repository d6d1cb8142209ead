#!/usr/bin/env bash
# The default strategy (suffix drafting, adaptive) against plain decoding where drafting could lose: a tiny model
# (stories260K: the ledger's 5% bound), SmolLM2 batched (--batch B: compute-bound steps) and SmolLM2 alone.
# Interleaved rounds in one run; ratios per round; ids compared (launch/bench/bench_default.py says more).
#   launch/bench/bench-default.sh [CASES (tiny,batch,single)] [ROUNDS (3)]
# Env: N_TINY (400 prompts x 200 tokens), N_SMOL (24), MAX_NEW (64), B (16), THREADS (2; tiny: 1), SMOL_MODEL
# (SmolLM2-135M-Instruct.gguf, the demo's file).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
CASES=${1:-tiny,batch,single}; ROUNDS=${2:-3}
la_positive ROUNDS="$ROUNDS"
export LOOKAHEAD_BIN=${LOOKAHEAD_BIN:-$BUILD/lookahead} SHARED
[ -x "$LOOKAHEAD_BIN" ] || die "no engine binary at $LOOKAHEAD_BIN (run launch/setup.sh)"
la_machine
exec python3 "$ROOT/launch/bench/bench_default.py" "$CASES" "$ROUNDS"
