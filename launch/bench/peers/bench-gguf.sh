#!/usr/bin/env bash
# Issue #32's speed targets on GGUF files: our plain decoding of a GGUF (weights kept quantized) against llama.cpp's
# `llama-bench` tg on the same file and thread count, as ratios within each round.
#   launch/bench-gguf.sh                      # Gemma-3-270M Q4_K_M; SmolLM2 Q8_0 and Q4_K_M; 2 threads, 3 rounds
#   ROUNDS=5 THREADS=1 N=64 launch/bench-gguf.sh
# The files: Gemma-3's Q4_K_M as the user downloads it ($DEPS/models/gemma-3-270m-q4_k_m.gguf, launch/setup.sh
# --test-deps); SmolLM2's Q8_0 and Q4_K_M made by llama.cpp's `llama-quantize` from the F32 GGUF that
# launch/bench/peers/build-llamacpp.sh converts (llama.cpp built once into $DEPS/llama.cpp-<ver>; llama-quantize is
# built here beside its other tools when missing).
# What each number includes (launch/bench/peers/bench_gguf.py prints it under the table):
#   llama.cpp: llama-bench -p 0 -n N -r 1: N one-token decode calls from an empty context, its reported t/s (a
#     warm-up run first, no sampling, no tokenizer);
#   ours: `lookahead generate --strategy ar --max-new-tokens N` on a short text prompt: decode steps / decode time
#     from --stats-json (steps / (seconds - prefill_s)): one-token forwards plus argmax and host work, no prefill.
# Each round runs every file with llama.cpp then ours, back to back; the ratio is ours / llama.cpp within the round,
# and the table gives its median and min-max over the rounds.
# Env: ROUNDS (3), THREADS (2), N (128), LOOKAHEAD_BIN (build/lookahead), OUT (build/bench-gguf.txt).
set -euo pipefail
LA_NAME=bench-gguf
. "$(dirname "${BASH_SOURCE[0]}")/../../lib.sh"
ROUNDS=${ROUNDS:-3}; THREADS=${THREADS:-2}; N=${N:-128}
la_positive ROUNDS="$ROUNDS" THREADS="$THREADS" N="$N"
export LOOKAHEAD_BIN=${LOOKAHEAD_BIN:-$BUILD/lookahead}
[ -x "$LOOKAHEAD_BIN" ] || die "no engine binary at $LOOKAHEAD_BIN (build it, or set LOOKAHEAD_BIN)"
GEMMA=$LA_MODELS/gemma-3-270m-q4_k_m.gguf
[ -s "$GEMMA" ] || die "no $GEMMA (run launch/setup.sh --test-deps)"
PEERS=$ROOT/launch/bench/peers

env_lines=$("$PEERS/build-llamacpp.sh" "$LA_MODELS/SmolLM2-135M-Instruct")
LLAMA_BIN=$(sed -n 's/^LLAMA_BIN=//p' <<<"$env_lines")
F32=$(sed -n 's/^GGUF_SmolLM2_135M_Instruct_F32=//p' <<<"$env_lines")
[ -x "$LLAMA_BIN/llama-bench" ] && [ -s "$F32" ] || die "build-llamacpp.sh gave no llama-bench or F32 GGUF"
if [ ! -x "$LLAMA_BIN/llama-quantize" ]; then
  log "building llama-quantize beside llama-bench (once)"
  cmake --build "$LLAMA_BIN/../build" -j"${JOBS:-1}" --target llama-quantize >"$LLAMA_BIN/../build-quantize.log" 2>&1 \
    || die "llama-quantize build failed: see $LLAMA_BIN/../build-quantize.log"
  install -m755 "$LLAMA_BIN/../build/bin/llama-quantize" "$LLAMA_BIN/llama-quantize"
fi
files=("gemma-3-270m Q4_K_M=$GEMMA")
for t in Q8_0 Q4_K_M; do
  out=$(dirname "$F32")/SmolLM2-135M-Instruct-$t.gguf
  if [ ! -s "$out" ] || [ "$F32" -nt "$out" ]; then
    log "llama-quantize $F32 -> $out"
    "$LLAMA_BIN/llama-quantize" "$F32" "$out.tmp" "$t" >"$out.log" 2>&1 || die "llama-quantize failed: see $out.log"
    mv "$out.tmp" "$out"
  fi
  files+=("SmolLM2-135M $t=$out")
done
mkdir -p "$(dirname "${OUT:-$BUILD/bench-gguf.txt}")"
{
  la_machine
  python3 "$ROOT/launch/bench/peers/bench_gguf.py" --llama-bench "$LLAMA_BIN/llama-bench" --rounds "$ROUNDS" --threads "$THREADS" \
    --tokens "$N" "${files[@]}"
} | tee "${OUT:-$BUILD/bench-gguf.txt}"
