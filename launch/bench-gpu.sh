#!/usr/bin/env bash
# GPU benchmarks: forward time versus step tokens T = 1, 2, 4, ..., 256 at contexts 256 and 1024, for the
# shapes of random:tinyllama-1.1b and random:llama-2-7b.
#
#   launch/bench-gpu.sh [BUILD_DIR]      # default build/; tables on stdout, copies in $OUT if set
#
# 1. Kernel level (always): build/bench_kernels times one layer's step attention (la::kern, tree mask) against
#    an ATen reference (cat + SDPA with a boolean mask) with CUDA events, fp16 and bf16.
# 2. End to end (only if build/lookahead exists and has a `bench-forward` command): the model forward per step
#    size. Options are passed only if `lookahead bench-forward --help` lists them.
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${1:-${LOOKAHEAD_BUILD:-$ROOT/build}}
LOGS=${OUT:-}
[ -n "$LOGS" ] && mkdir -p "$LOGS"
STATUS=0
TOKENS=1,2,4,8,16,32,64,128,256
CONTEXTS=256,1024

run() {  # run NAME CMD...: prints, tees into $OUT/NAME.txt when set
  local name=$1
  shift
  echo "## $name: $*"
  if [ -n "$LOGS" ]; then
    "$@" 2>&1 | tee "$LOGS/$name.txt"
  else
    "$@" 2>&1
  fi
  local rc=${PIPESTATUS[0]}
  if [ "$rc" != 0 ] && [ "$rc" != 77 ]; then
    echo "## $name failed (rc $rc)"
    STATUS=1
  fi
  echo
}

if [ -x "$BUILD/bench_kernels" ]; then
  run bench_kernels_f16 "$BUILD/bench_kernels" --contexts "$CONTEXTS" --dtype f16 --models tinyllama-1.1b,llama-2-7b
  run bench_kernels_bf16 "$BUILD/bench_kernels" --contexts "$CONTEXTS" --dtype bf16 --models tinyllama-1.1b,llama-2-7b
  run bench_kernels_long "$BUILD/bench_kernels" --contexts 4096 --dtype f16 --models llama-2-7b --iters 20
else
  echo "## bench_kernels not built in $BUILD (a CUDA build builds it)"
  STATUS=1
fi

LA=$BUILD/lookahead
if [ -x "$LA" ] && "$LA" --help 2>&1 | grep -q "bench-forward"; then
  help=$("$LA" bench-forward --help 2>&1 || true)
  for model in random:tinyllama-1.1b random:llama-2-7b; do
    for ctx in ${CONTEXTS//,/ }; do
      args=(bench-forward)
      if grep -q -- "--model" <<<"$help"; then args+=(--model "$model"); fi
      if grep -q -- "--context" <<<"$help"; then args+=(--context "$ctx"); fi
      if grep -q -- "--tokens" <<<"$help"; then args+=(--tokens "$TOKENS"); fi
      if grep -q -- "--device" <<<"$help"; then args+=(--device cuda); fi
      run "forward_${model#random:}_ctx$ctx" "$LA" "${args[@]}"
    done
  done
else
  echo "## end-to-end forward benchmark skipped: $LA missing or without a bench-forward command"
fi
exit $STATUS
