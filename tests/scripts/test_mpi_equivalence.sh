#!/usr/bin/env bash
# Lookahead parallelism is lossless: for every strategy `lookahead generate --help` lists (of ar, jacobi, lade,
# trie, prompt-lookup) and K = 1, 2, 3, 4 MPI ranks, the ids generated for 12 TinyStories prompts equal the
# single-process run's (--lp-size K: one lookahead-parallel group; data-parallel groups: test_mpi_groups.sh). Also: a sampled run (temperature > 0) on 3 ranks, a run through launch/mpirun.sh, and
# --comm nccl on a CPU model is refused with a clear error.
# labels: mpi
# timeout: 1500
set -u
BUILD=$1; SRC=$2; SHARED=$3
source "$SRC/tests/scripts/lib.sh"  # need_*, test_tmp, same_records
need_model
need_mpi
command -v python3 >/dev/null 2>&1 || skip "python3 not installed"
help=$("$BIN" generate --help 2>&1) || skip "lookahead generate --help failed"
grep -q -- "--comm" <<<"$help" || skip "lookahead generate has no --comm option yet (distributed CLI not wired)"

test_tmp
awk 'NR % 150 == 1' "$P" | head -n 12 > "$T/prompts.jsonl"
common=(generate --model "$M" --input "$T/prompts.jsonl" --max-new-tokens 40 --quiet --threads 1)
fails=0

check() {  # check NAME REF OUT RC LOG
  local name=$1 ref=$2 out=$3 rc=$4 log=$5
  if [ "$rc" != 0 ]; then
    echo "FAIL: $name: exit $rc"; tail -n 15 "$log" | sed 's/^/    /'; fails=$((fails + 1))
  elif ! same_records "$ref" "$out" count=12; then
    echo "FAIL: $name: ids differ from the single-process run"; fails=$((fails + 1))
  else
    echo "ok: $name"
  fi
}

strategy_help=$(grep -A2 -- "--strategy" <<<"$help")
for s in ar jacobi lade trie prompt-lookup; do
  if ! grep -qw -- "$s" <<<"$strategy_help"; then echo "skip: strategy $s is not listed by --help"; continue; fi
  ref=$T/$s.ref.jsonl
  "$BIN" "${common[@]}" --strategy "$s" --output "$ref" >"$T/log" 2>&1
  rc=$?
  if [ $rc != 0 ]; then
    if grep -qi "not implemented" "$T/log"; then echo "skip: strategy $s is not implemented yet"; continue; fi
    echo "FAIL: $s single-process run: exit $rc"; tail -n 15 "$T/log" | sed 's/^/    /'; fails=$((fails + 1)); continue
  fi
  for k in 1 2 3 4; do
    out=$T/$s.k$k.jsonl
    timeout 300 mpirun -np "$k" --oversubscribe --bind-to none "$BIN" "${common[@]}" --strategy "$s" --comm mpi \
      --lp-size "$k" --output "$out" >"$T/log" 2>&1
    check "$s on $k rank(s)" "$ref" "$out" $? "$T/log"
  done
done

# Sampling is position-keyed, so the ranks' samples agree and the output equals the single-process one.
if grep -qw lade <<<"$strategy_help"; then
  samp=(--strategy lade --temperature 0.8 --top-k 40 --seed 7)
  "$BIN" "${common[@]}" "${samp[@]}" --output "$T/samp.ref.jsonl" >"$T/log" 2>&1
  rc=$?
  if [ $rc = 0 ]; then
    timeout 300 mpirun -np 3 --oversubscribe --bind-to none "$BIN" "${common[@]}" "${samp[@]}" --comm auto --lp-size 3 \
      --output "$T/samp.k3.jsonl" >"$T/log" 2>&1
    check "lade sampled (T=0.8) on 3 ranks, --comm auto" "$T/samp.ref.jsonl" "$T/samp.k3.jsonl" $? "$T/log"
  else
    echo "FAIL: sampled single-process run: exit $rc"; tail -n 15 "$T/log" | sed 's/^/    /'; fails=$((fails + 1))
  fi
fi

# Ouroboros: rank 0 drafts with the draft model; the target's verification is partitioned like any plan.
"$BIN" "${common[@]}" --strategy ouroboros --draft-model "$SHARED/models/llama2xs" --output "$T/ouro.ref.jsonl" \
  >"$T/log" 2>&1
check "ouroboros single process equals ar" "$T/ar.ref.jsonl" "$T/ouro.ref.jsonl" $? "$T/log"
for k in 2 3; do
  timeout 300 mpirun -np "$k" --oversubscribe --bind-to none "$BIN" "${common[@]}" --strategy ouroboros \
    --draft-model "$SHARED/models/llama2xs" --comm mpi --lp-size "$k" --output "$T/ouro.k$k.jsonl" >"$T/log" 2>&1
  check "ouroboros on $k ranks" "$T/ouro.ref.jsonl" "$T/ouro.k$k.jsonl" $? "$T/log"
done

# The launcher wrapper (root variables, --oversubscribe, binding, env passing).
ws=ar
grep -qw trie <<<"$strategy_help" && [ -f "$T/trie.ref.jsonl" ] && ws=trie
LOOKAHEAD_BIN=$BIN LA_LAUNCH_QUIET=1 timeout 300 "$SRC/launch/mpirun.sh" -np 3 "${common[@]}" --strategy "$ws" --lp-size 3 \
  --output "$T/wrap.jsonl" >"$T/log" 2>&1
check "launch/mpirun.sh -np 3 ($ws)" "$T/$ws.ref.jsonl" "$T/wrap.jsonl" $? "$T/log"

# --comm nccl without a CUDA model (or without NCCL in the build): a clear error, not a hang or a crash.
timeout 60 "$BIN" "${common[@]}" --strategy ar --comm nccl --device cpu --output "$T/nccl.jsonl" >"$T/log" 2>&1
rc=$?
if [ $rc != 0 ] && [ $rc -lt 124 ] && grep -qi nccl "$T/log"; then
  echo "ok: --comm nccl on cpu refused: $(grep -i nccl "$T/log" | head -n 1)"
else
  echo "FAIL: --comm nccl on cpu: exit $rc"; sed 's/^/    /' "$T/log" | tail -n 5; fails=$((fails + 1))
fi

[ $fails = 0 ] && echo "PASS" || echo "$fails failure(s)"
[ $fails = 0 ]
