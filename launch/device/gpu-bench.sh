#!/usr/bin/env bash
# Everything the GPU session measures, in one device call of at most 9 minutes (each part also alone):
#
#   launch/device/gpu-bench.sh [a] [b] [c] [d] [e] [k]  # default: a b c d e, in this order (k only when named)
#     a  kernel tests (test_kernels, then the CudaForward model tests), compute-sanitizer memcheck + racecheck on
#        a short subset
#     b  bench-forward --device cuda --dtype bf16 --kernels both at T = 1..256, contexts 256 and 1024, for
#        random:tinyllama-1.1b and random:llama-2-7b (one process per model: weights made once)
#     c  plain decoding (T = 1 forward with kernels and graphs, from b) against the bandwidth floor
#        (weight bytes / measured device copy bandwidth)
#     d  transformers on the same bf16 weights (tinyllama shape, saved once): greedy, prompt lookup, assisted
#        generation with a small random draft, beside lookahead generate --device cuda: ar, lade, trie,
#        prompt-lookup, on the same prompt ids (with repeated n-grams)
#     e  fp32 lossless on the GPU: every strategy's ids equal plain decoding's, and plain decoding's equal the CPU
#        run, on the shared models and random:tinyllama-1.1b
#     k  kernel level: bench_kernels times one layer's step attention (la::kern, tree mask) against an ATen
#        reference (cat + SDPA with a boolean mask) with CUDA events, fp16 and bf16, at T = 1..256 and contexts 256
#        and 1024 (and 4096 for llama-2-7b), for the tinyllama-1.1b and llama-2-7b shapes
#
# Binaries: the bundle (launch/device/device-bundle.sh; its run.sh sets the library path), else a build dir.
#   LA_BUNDLE (default device-bundle/)  or  LOOKAHEAD_BUILD (a build dir with lookahead, tests/, bench_kernels)
# Each part prints a table and writes it (and its logs) under $OUT when set (the device tool's output folder).
# Part time limits (seconds): LA_T_A=150 LA_T_B=240 LA_T_D=150 LA_T_E=120 LA_T_K=240.
set -uo pipefail
LA_NAME=gpu-bench
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
BUNDLE=${LA_BUNDLE:-$ROOT/device-bundle}
LOGS=${OUT:-$ROOT/gpu-bench-out}
mkdir -p "$LOGS"
SHARED=${LA_SHARED:-$ROOT/shared}
[ -d "$SHARED/models" ] || SHARED=$ROOT/../shared
PY=${PYTHON:-python3}
HF="$PY $ROOT/launch/device/hf_gpu_bench.py"
export PYTHONUNBUFFERED=1
log() { echo "[gpu-bench $(date +%H:%M:%S)] $*" >&2; }

if [ -x "$BUNDLE/run.sh" ]; then
  eval "$("$BUNDLE/run.sh" --env)"
  LA=$BUNDLE/bin/lookahead; TK=$BUNDLE/bin/test_kernels; TM=$BUNDLE/bin/test_model; BK=$BUNDLE/bin/bench_kernels
else
  B=${LOOKAHEAD_BUILD:-$ROOT/build}
  LA=$B/lookahead; TK=$B/tests/test_kernels; TM=$B/tests/test_model; BK=$B/bench_kernels
fi
[ -x "$LA" ] || { log "no lookahead binary (bundle $BUNDLE or build dir): run launch/device/device-bundle.sh here first"; exit 1; }
log "binaries: $LA; shared: $SHARED; output: $LOGS"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >"$LOGS/gpu.txt" 2>&1
log "gpu: $(cat "$LOGS/gpu.txt")"
STATUS=0
SUMMARY=$LOGS/summary.txt
: >"$SUMMARY"
record() { echo "$1: $2" | tee -a "$SUMMARY" >&2; case "$2" in ok*) ;; *) STATUS=1 ;; esac; }
# table NAME: stdin -> stdout and $LOGS/NAME.txt
table() { tee "$LOGS/$1.txt"; }

PARTS=("$@")
[ ${#PARTS[@]} -eq 0 ] && PARTS=(a b c d e)
want() { local p; for p in "${PARTS[@]}"; do [ "$p" = "$1" ] && return 0; done; return 1; }

# ----------------------------------------------------------------------------------------------------- a
if want a; then
  log "part a: kernel tests"
  timeout "${LA_T_A:-150}" "$TK" --gtest_brief=1 >"$LOGS/a_test_kernels.log" 2>&1; rc=$?
  grep -E "PASSED|FAILED|SKIPPED|error" "$LOGS/a_test_kernels.log" | tail -15
  if grep -q "no CUDA device" "$LOGS/a_test_kernels.log"; then record "a test_kernels" "SKIPPED: no CUDA device"; else
    record "a test_kernels" "$([ $rc = 0 ] && echo ok || echo "FAILED rc=$rc")"; fi
  if [ -x "$TM" ]; then
    LA_SHARED="$SHARED" timeout "${LA_T_A:-150}" "$TM" --gtest_filter='*CudaForward*' --gtest_brief=1 >"$LOGS/a_cuda_forward.log" 2>&1; rc=$?
    grep -E "PASSED|FAILED|SKIPPED|Failure|error" "$LOGS/a_cuda_forward.log" | tail -20
    record "a cuda forward tests" "$([ $rc = 0 ] && echo ok || echo "FAILED rc=$rc")"
  fi
  CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer /usr/local/cuda-*/bin/compute-sanitizer 2>/dev/null | head -1)
  SUB='StepAttention.DeviceCacheLengthForGraphReplay:StepAttention.PaddingRowsDoNotChangeRealRows:RmsNorm.MatchesHfReference:Rope.*:SwiGlu.*:KvCache.*'
  if [ -n "$CS" ]; then
    for tool in memcheck racecheck; do
      timeout 120 "$CS" --tool $tool --error-exitcode 9 "$TK" --gtest_filter="$SUB" --gtest_brief=1 \
        >"$LOGS/a_sanitizer_$tool.log" 2>&1; rc=$?
      tail -4 "$LOGS/a_sanitizer_$tool.log"
      record "a compute-sanitizer $tool" "$([ $rc = 0 ] && echo ok || echo "FAILED rc=$rc (9: errors found; 124: timeout)")"
    done
  else
    record "a compute-sanitizer" "SKIPPED: not found"
  fi
fi

# ----------------------------------------------------------------------------------------------------- b
if want b || want c; then
  for model in tinyllama-1.1b llama-2-7b; do
    log "part b: bench-forward random:$model bf16, kernels and ATen on the same weights"
    timeout "${LA_T_B:-240}" "$LA" bench-forward --model "random:$model" --device cuda --dtype bf16 --kernels both \
      --tokens 1,2,4,8,16,32,64,128,256 --context 256,1024 --repeat 10 2>&1 | table "b_forward_$model"
    rc=${PIPESTATUS[0]}
    record "b bench-forward $model" "$([ $rc = 0 ] && echo ok || echo "FAILED rc=$rc")"
  done
fi

# ----------------------------------------------------------------------------------------------------- c
if want c; then
  log "part c: plain decoding vs the bandwidth floor"
  $HF bandwidth 2>&1 | tee "$LOGS/c_bandwidth.txt"
  BW=$(grep -o 'BANDWIDTH_GBS=[0-9.]*' "$LOGS/c_bandwidth.txt" | cut -d= -f2)
  {
    echo "plain decoding = one 1-token forward per token (bench-forward T=1, context 1024, kernels + graphs, bf16)"
    for model in tinyllama-1.1b llama-2-7b; do
      ms=$(awk '$1 == 1024 && $2 == 1 {print $3}' "$LOGS/b_forward_$model.txt" 2>/dev/null)
      if [ -n "$BW" ] && [ -n "$ms" ]; then $HF floor --model "random:$model" --ms-per-token "$ms" --bandwidth "$BW" | \
        { [ "$model" = tinyllama-1.1b ] && cat || tail -n 1; }; fi
    done
  } | table c_floor
  record "c floor" "$([ -n "$BW" ] && echo ok || echo FAILED)"
fi

# ----------------------------------------------------------------------------------------------------- d
if want d; then
  log "part d: transformers vs lookahead on the same weights (tinyllama shape, bf16)"
  W=${LA_WORK:-/tmp/la-gpu-bench}
  mkdir -p "$W"
  (
    set -e
    mkdir -p "$W/f32"
    [ -f "$W/f32/model.safetensors" ] || "$LA" save-model --model random:tinyllama-1.1b --out "$W/f32"
    [ -f "$W/bf16/config.json" ] || $HF to-bf16 --src "$W/f32" --dst "$W/bf16"
    $HF prompts --vocab 32000 --out "$W/prompts.jsonl" --n 2
    $HF hf --model "$W/bf16" --prompts "$W/prompts.jsonl" --max-new 128 --json "$W/hf.json"
    specs=()
    for s in ar lade trie prompt-lookup; do
      "$LA" generate --model "$W/bf16" --tokenizer bytes --input "$W/prompts.jsonl" \
        --output "$W/la-$s.jsonl" --stats-json "$W/la-$s.json" --max-new-tokens 128 --device cuda --dtype bf16 \
        --strategy "$s" --batch 1 -q
      specs+=("lookahead-$s=$W/la-$s.json:$W/la-$s.jsonl")
    done
    $HF table --hf "$W/hf.json" --lookahead "${specs[@]}"
  ) >"$LOGS/d_run.log" 2>&1 &
  pid=$!
  ( sleep "${LA_T_D:-150}"; kill -TERM $pid 2>/dev/null ) & killer=$!
  wait $pid; rc=$?
  kill $killer 2>/dev/null
  sed -n '/^device:/,$p' "$LOGS/d_run.log" | table d_hf_vs_lookahead
  [ $rc = 0 ] || tail -20 "$LOGS/d_run.log"
  record "d transformers comparison" "$([ $rc = 0 ] && echo ok || echo "FAILED rc=$rc")"
fi

# ----------------------------------------------------------------------------------------------------- e
if want e; then
  log "part e: fp32 lossless on the GPU"
  E=${LA_WORK:-/tmp/la-gpu-bench}/lossless
  mkdir -p "$E"
  head -n 8 "$SHARED/datasets/tinystories/prompts.jsonl" >"$E/p.jsonl"
  $HF prompts --vocab 32000 --out "$E/rand.jsonl" --n 2 >/dev/null
  {
    printf "%-24s %-14s %-10s %s\n" model strategy vs result
    fails=0
    for spec in "$SHARED/models/stories260K:p:48" "$SHARED/models/llama2xs:p:48" "random:tinyllama-1.1b:rand:24"; do
      model=${spec%:*:*}; rest=${spec#"$model":}; pf=${rest%%:*}; n=${rest#*:}
      tag=$(basename "$model" | tr ':' '_')
      common=(generate --model "$model" --input "$E/$pf.jsonl" --max-new-tokens "$n" --dtype fp32 -q)
      [[ $model == random:* ]] || [ -d "$model" ] || { printf "%-24s skipped: %s missing\n" "$tag" "$model"; continue; }
      timeout "${LA_T_E:-120}" "$LA" "${common[@]}" --device cpu --strategy ar --output "$E/$tag-cpu.jsonl" || fails=$((fails+1))
      for s in ar jacobi lade trie prompt-lookup; do
        timeout "${LA_T_E:-120}" "$LA" "${common[@]}" --device cuda --strategy "$s" --output "$E/$tag-$s.jsonl" || fails=$((fails+1))
        vs=$E/$tag-ar.jsonl; [ $s = ar ] && vs=$E/$tag-cpu.jsonl
        r=$($HF same-ids "$E/$tag-$s.jsonl" "$vs" 2>&1) || fails=$((fails+1))
        printf "%-24s %-14s %-10s %s\n" "$tag" "$s" "$([ $s = ar ] && echo "cpu ar" || echo "cuda ar")" "$r"
      done
    done
    echo "failures: $fails"
  } 2>&1 | table e_lossless
  grep -q "^failures: 0" "$LOGS/e_lossless.txt" && record "e lossless" ok || record "e lossless" FAILED
fi

# ----------------------------------------------------------------------------------------------------- k
if want k; then
  log "part k: kernel-level step attention vs ATen"
  if [ -x "$BK" ]; then
    for spec in "f16:256,1024:tinyllama-1.1b,llama-2-7b:" "bf16:256,1024:tinyllama-1.1b,llama-2-7b:" \
                "f16:4096:llama-2-7b:--iters 20"; do
      IFS=: read -r dt ctx models extra <<<"$spec"
      # shellcheck disable=SC2086
      timeout "${LA_T_K:-240}" "$BK" --contexts "$ctx" --dtype "$dt" --models "$models" $extra 2>&1 \
        | table "k_bench_kernels_${dt}_${ctx//,/_}"
      rc=${PIPESTATUS[0]}
      record "k bench_kernels $dt $ctx" "$([ $rc = 0 ] && echo ok || echo "FAILED rc=$rc")"
    done
  else
    record "k bench_kernels" "FAILED: $BK missing (a CUDA build builds it)"
  fi
fi

log "summary:"
cat "$SUMMARY"
exit $STATUS
