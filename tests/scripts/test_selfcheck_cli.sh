#!/usr/bin/env bash
# --selfcheck end to end on the CPU (where it checks the skinny GEMM against the ATen forward; on a GPU the same
# chain checks kernels+graphs, kernels, ATen): the load line and --stats-json name the serving path, an injected
# fault (LOOKAHEAD_SELFCHECK_FAULT) makes the run fall back to the ATen forward with the same ids as --kernels off,
# strict exits with one error naming the mismatch, a bad value is one clear error. Also --max-context.
# labels: cli
# timeout: 300
set -u
BUILD=$1; SRC=$2; SHARED=$3
BIN=$BUILD/lookahead
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
source "$SRC/tests/scripts/lib.sh"
fails=0; n=0
check() { n=$((n+1)); if eval "$2"; then echo "ok: $1"; else echo "FAIL: $1"; fails=$((fails+1)); fi; }
args=(generate --model random:tiny-gqa-bias:3 --prompt "the cat sat" --max-new-tokens 12)
serving() { python3 -c "import json; print(json.load(open('$1'))['selfcheck'][0]['serving'])"; }

"$BIN" "${args[@]}" --selfcheck on --stats-json "$T/on.json" >"$T/on.txt" 2>"$T/on.err"; rc=$?
check "selfcheck on: exits 0 (rc=$rc)" "[ $rc -eq 0 ]"
check "load line: $(grep -o 'selfcheck[^]]*' "$T/on.err" | head -1)" "grep -q 'selfcheck passed (9 steps)' '$T/on.err'"
check "stats: serving $(serving "$T/on.json")" "[ \"$(serving "$T/on.json")\" = kernels ]"

LOOKAHEAD_SELFCHECK_FAULT=kernels=corrupt "$BIN" "${args[@]}" --selfcheck on --stats-json "$T/f.json" \
  >"$T/f.txt" 2>"$T/f.err"; rc=$?
check "injected corruption: exits 0 (rc=$rc)" "[ $rc -eq 0 ]"
check "load line: $(grep -o 'selfcheck[^]]*' "$T/f.err" | head -c 200)" \
  "grep -q 'selfcheck: kernels failed (step 2 of 9.*logit of id 3.*); serving ATen forward' '$T/f.err'"
check "stats: serving $(serving "$T/f.json")" "[ \"$(serving "$T/f.json")\" = 'ATen forward' ]"
"$BIN" "${args[@]}" --kernels off >"$T/off.txt" 2>/dev/null
check "fallback output == --kernels off output" "cmp -s '$T/f.txt' '$T/off.txt'"
check "default on CPU: no selfcheck" "! \"$BIN\" \"\${args[@]}\" 2>&1 >/dev/null | grep -q selfcheck"

export LOOKAHEAD_SELFCHECK_FAULT=kernels=throw
expect_error "--selfcheck strict: the kernels path of random:tiny-gqa-bias:3" "${args[@]}" --selfcheck strict
unset LOOKAHEAD_SELFCHECK_FAULT
expect_error "invalid --selfcheck 'maybe'" "${args[@]}" --selfcheck maybe

# --max-context caps the context (and the KV cache): same output when it suffices, one clear error when not.
"$BIN" "${args[@]}" --max-context 40 >"$T/mc.txt" 2>/dev/null; rc=$?
check "--max-context 40: exits 0, same text as without (rc=$rc)" "[ $rc -eq 0 ] && cmp -s '$T/mc.txt' '$T/off.txt'"
expect_error "exceeds the model's context of 12 positions" "${args[@]}" --max-context 12 -q
expect_error "invalid --max-context -3" "${args[@]}" --max-context -3

echo "$((n-fails))/$n passed"
[ $fails -eq 0 ]
