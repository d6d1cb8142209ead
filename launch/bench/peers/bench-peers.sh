#!/usr/bin/env bash
# Our engine against llama.cpp on the same weights, prompts and threads, in one run (a benchmark, not a test):
# plain decoding (llama-completion vs --strategy ar), llama-lookup (default and --spec-draft-n-max 10) vs
# --strategy prompt-lookup (--adaptive off and default) and the trie and suffix defaults, llama-lookahead vs
# --strategy lade (--adaptive off and default), on HumanEval (raw), MBPP, GSM8K and MT-Bench (chat) prompts
# (launch/prompt_sets.py), for two models: SmolLM2-135M-Instruct, F32 and BF16 weights (our directory; llama.cpp's
# GGUF converted from it), and Gemma-3-270M, its Q4_K_M GGUF as downloaded, served as it is by both engines
# (`--model FILE.gguf`: our quantized kernels); tokens/s (decode only), tokens per forward, ours / llama.cpp, same text or not; and the memory
# floor from a streaming read measured in the same run. Rounds are interleaved; min/median/max reported. Body: launch/bench/peers/bench_peers.py.
#   launch/bench/peers/bench-peers.sh                             # THREADS=2, N=2 prompts per set, ROUNDS=3, 128 new tokens
#   N=5 ROUNDS=5 CHART=/tmp/peers.png launch/bench/peers/bench-peers.sh
#   LOOKAHEAD_BIN=/work/main/build/lookahead SETS=humaneval,gsm8k DTYPES=f32 launch/bench/peers/bench-peers.sh
# Env: LOOKAHEAD_BIN (default: build/lookahead of this checkout), PEER_MODELS (smollm2,gemma3), MODEL (SmolLM2's HF
# directory, default $LOOKAHEAD_DEPS/models/SmolLM2-135M-Instruct: launch/setup.sh --test-deps converts it),
# GEMMA3_GGUF (default $LOOKAHEAD_DEPS/models/gemma-3-270m-q4_k_m.gguf: launch/setup.sh --test-deps assembles it; the
# Gemma rows are skipped with a note when it is missing), THREADS, N, ROUNDS, MAX_NEW, SETS, DTYPES (SmolLM2's:
# f32,bf16), CHART (PNG path of SmolLM2's bar chart, Gemma's beside it as *-gemma3.png; launch/plot.py), LOOKAHEAD_SHARED.
# llama.cpp (pinned: PyPI llama-cpp-python==0.3.36's vendored source) and the GGUF files are made once by
# launch/bench/peers/build-llamacpp.sh under ${LOOKAHEAD_DEPS:-~/.cache/lookahead}; the stream-read probe likewise.
set -euo pipefail
LA_NAME=bench-peers
. "$(dirname "${BASH_SOURCE[0]}")/../../lib.sh"
la_peer_env
export THREADS=${THREADS:-2} N=${N:-2} ROUNDS=${ROUNDS:-3} MAX_NEW=${MAX_NEW:-128}
export GEMMA3_GGUF=${GEMMA3_GGUF:-$LA_MODELS/gemma-3-270m-q4_k_m.gguf}
PEER_MODELS=${PEER_MODELS:-smollm2,gemma3}
for m in ${PEER_MODELS//,/ }; do
  case "$m" in smollm2|gemma3) ;; *) die "PEER_MODELS: unknown model '$m' (known: smollm2, gemma3)" ;; esac
done
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
echo "command: PEER_MODELS=$PEER_MODELS THREADS=$THREADS N=$N ROUNDS=$ROUNDS MAX_NEW=$MAX_NEW SETS=${SETS:-humaneval,mbpp,gsm8k,mt-bench} DTYPES=${DTYPES:-f32,bf16} launch/bench/peers/bench-peers.sh"
rc=0
for m in ${PEER_MODELS//,/ }; do
  if [ "$m" = smollm2 ]; then
    echo; echo "## SmolLM2-135M-Instruct: our directory (F32/BF16) against llama.cpp's GGUF converted from it"
    OURS_GGUF=0 "$PY" "$ROOT/launch/bench/peers/bench_peers.py" || rc=1
  elif [ ! -s "$GEMMA3_GGUF" ]; then
    echo; echo "## Gemma-3-270M: skipped, no $GEMMA3_GGUF (launch/setup.sh --test-deps assembles it)"
  else
    echo; echo "## Gemma-3-270M: its Q4_K_M GGUF as downloaded, served as it is by both engines"
    MODEL=$GEMMA3_GGUF GGUF_Q4_K_M=$GEMMA3_GGUF DTYPES=q4_k_m OURS_GGUF=1 CHART=${CHART:+${CHART%.png}-gemma3.png} \
      "$PY" "$ROOT/launch/bench/peers/bench_peers.py" || rc=1
  fi
done
exit $rc
