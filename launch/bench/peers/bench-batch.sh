#!/usr/bin/env bash
# Batch jobs against llama.cpp's batched decoding on the same weights, prompts and threads, in one run (a
# benchmark, not a test): job tokens/s (generated tokens over the time of prompts + decoding, load excluded, for
# both) and p50/p95 request latency of `lookahead generate --input --batch B` (plain decoding, and the drafting
# default: suffix with adaptive drafting) against `llama-batched-bench` at the same B with
# our mean prompt and generation lengths, for MT-Bench (chat), HumanEval and GSM8K prompts; rounds interleaved (our
# two engines swap order every round), median [min-max] reported; every one of our rows' ids compared with plain
# decoding at the smallest B. Body: launch/bench/peers/bench_batch.py.
#   launch/bench/peers/bench-batch.sh                                  # THREADS=2, N=64 prompts per set, B=1,2,4,8,16,32
#   N=16 MAX_NEW=64 BATCHES=1,4,16 ROUNDS=1 CHART=/tmp/batch.png launch/bench/peers/bench-batch.sh
# Env: LOOKAHEAD_BIN, MODEL (default $LOOKAHEAD_DEPS/models/SmolLM2-135M-Instruct), THREADS, N, ROUNDS, MAX_NEW,
# BATCHES, SETS (mt-bench,humaneval,gsm8k), DTYPE (f32|bf16), CHART (PNG), LLAMA=0 (skip the peer),
# LOOKAHEAD_SHARED. llama.cpp and its GGUF of our weights come from launch/bench/peers/build-llamacpp.sh (built once).
set -euo pipefail
LA_NAME=bench-batch
. "$(dirname "${BASH_SOURCE[0]}")/../../lib.sh"
la_peer_env
export THREADS=${THREADS:-2} N=${N:-64} ROUNDS=${ROUNDS:-2} MAX_NEW=${MAX_NEW:-128} BATCHES=${BATCHES:-1,2,4,8,16,32}
export SETS=${SETS:-mt-bench,humaneval,gsm8k} DTYPE=${DTYPE:-f32} LLAMA=${LLAMA:-1} CHART=${CHART:-}
la_positive THREADS="$THREADS" N="$N" ROUNDS="$ROUNDS" MAX_NEW="$MAX_NEW"
case "$BATCHES" in *[!0-9,]*|"") die "BATCHES must be a comma-separated list of numbers";; esac
case "$DTYPE" in f32|bf16) ;; *) die "DTYPE must be f32 or bf16";; esac
export LLAMA_BIN="" GGUF=""
if [ "$LLAMA" = 1 ]; then
  out=$("$ROOT/launch/bench/peers/build-llamacpp.sh" "$MODEL") || die "launch/bench/peers/build-llamacpp.sh failed"
  LLAMA_BIN=$(sed -n 's/^LLAMA_BIN=//p' <<<"$out")
  key=$([ "$DTYPE" = f32 ] && echo F32 || echo BF16)
  GGUF=$(grep -m1 "^GGUF_.*_$key=" <<<"$out" | cut -d= -f2-)
  [ -x "$LLAMA_BIN/llama-batched-bench" ] || die "no llama-batched-bench in $LLAMA_BIN"
fi
exec "$PY" "$ROOT/launch/bench/peers/bench_batch.py"
