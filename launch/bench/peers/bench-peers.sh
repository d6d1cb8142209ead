#!/usr/bin/env bash
# Our engine against llama.cpp on the same weights, prompts and threads, in one run (a benchmark, not a test):
# plain decoding (llama-completion vs --strategy ar), llama-lookup (default and --spec-draft-n-max 10) vs
# --strategy prompt-lookup (--adaptive off and default) and the trie and suffix defaults, llama-lookahead vs
# --strategy lade (--adaptive off and default), on HumanEval, MBPP (raw), GSM8K and MT-Bench (chat) prompts, F32
# and BF16 weights; tokens/s (decode only), tokens per forward, ours / llama.cpp, same text or not; and the memory
# floor from a streaming read measured in the same run. Rounds are interleaved; min/median/max reported. Body: launch/bench/peers/bench_peers.py.
#   launch/bench/peers/bench-peers.sh                             # THREADS=2, N=2 prompts per set, ROUNDS=3, 128 new tokens
#   N=5 ROUNDS=5 CHART=/tmp/peers.png launch/bench/peers/bench-peers.sh
#   LOOKAHEAD_BIN=/work/main/build/lookahead SETS=humaneval,gsm8k DTYPES=f32 launch/bench/peers/bench-peers.sh
# Env: LOOKAHEAD_BIN (default: build/lookahead of this checkout), MODEL (HF directory, default
# $LOOKAHEAD_DEPS/models/SmolLM2-135M-Instruct), THREADS, N, ROUNDS, MAX_NEW, SETS, DTYPES (f32,bf16), CHART (PNG
# path: a bar chart; matplotlib is pip-installed into the venv if missing), LOOKAHEAD_SHARED (../shared).
# llama.cpp (pinned: PyPI llama-cpp-python==0.3.36's vendored source) and the GGUF files are made once by
# launch/bench/peers/build-llamacpp.sh under ${LOOKAHEAD_DEPS:-~/.cache/lookahead}; the stream-read probe likewise.
set -euo pipefail
LA_NAME=bench-peers
. "$(dirname "${BASH_SOURCE[0]}")/../../lib.sh"
export PY=${PY:-$VENV/bin/python}
export LOOKAHEAD_BIN=${LOOKAHEAD_BIN:-$BUILD/lookahead}
export MODEL=${MODEL:-$LA_MODELS/SmolLM2-135M-Instruct}
export SHARED
export THREADS=${THREADS:-2} N=${N:-2} ROUNDS=${ROUNDS:-3} MAX_NEW=${MAX_NEW:-128}
[ -x "$LOOKAHEAD_BIN" ] || die "no engine binary at $LOOKAHEAD_BIN (build it, or set LOOKAHEAD_BIN)"
[ -f "$MODEL/config.json" ] || die "no model directory at $MODEL (run launch/setup.sh, or set MODEL)"
[ -d "$SHARED/datasets" ] || die "no shared datasets at $SHARED/datasets (set LOOKAHEAD_SHARED)"
[ -x "$PY" ] || die "no python at $PY (run launch/setup.sh first)"
la_positive THREADS="$THREADS" N="$N" ROUNDS="$ROUNDS" MAX_NEW="$MAX_NEW"

# The peer and its GGUF files (once); its last lines are KEY=VALUE.
out=$("$ROOT/launch/bench/peers/build-llamacpp.sh" "$MODEL") || die "launch/bench/peers/build-llamacpp.sh failed"
LLAMA_BIN=$(sed -n 's/^LLAMA_BIN=//p' <<<"$out")
GGUF_F32=$(grep -m1 '^GGUF_.*_F32=' <<<"$out" | cut -d= -f2-)
GGUF_BF16=$(grep -m1 '^GGUF_.*_BF16=' <<<"$out" | cut -d= -f2-)
export LLAMA_BIN GGUF_F32 GGUF_BF16

# The streaming-read probe (our own code, launch/bench/peers/stream_read.cpp), compiled once per source change.
export STREAM_BIN=$DEPS/bench-peers/stream_read
if [ ! -x "$STREAM_BIN" ] || [ "$ROOT/launch/bench/peers/stream_read.cpp" -nt "$STREAM_BIN" ]; then
  mkdir -p "$DEPS/bench-peers"
  ${CXX:-c++} -O3 -march=native -std=c++17 -pthread "$ROOT/launch/bench/peers/stream_read.cpp" -o "$STREAM_BIN.tmp" \
    || die "compiling launch/bench/peers/stream_read.cpp failed"
  mv "$STREAM_BIN.tmp" "$STREAM_BIN"
fi

la_machine
echo "engine: $LOOKAHEAD_BIN ($(git -C "$(dirname "$LOOKAHEAD_BIN")" rev-parse --short HEAD 2>/dev/null || echo '?')); peer: llama.cpp from llama-cpp-python==0.3.36 in $LLAMA_BIN"
echo "command: THREADS=$THREADS N=$N ROUNDS=$ROUNDS MAX_NEW=$MAX_NEW SETS=${SETS:-humaneval,mbpp,gsm8k,mt-bench} DTYPES=${DTYPES:-f32,bf16} launch/bench/peers/bench-peers.sh"
exec "$PY" "$ROOT/launch/bench/peers/bench_peers.py"
