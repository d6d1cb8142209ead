# Shared by the CLI test scripts (sourced; not a test itself). Needs BIN, T (a temp dir), and counters n, fails.

# expect_error "needle" args...: `lookahead args...` must fail with exactly one stderr line containing needle,
# a non-zero exit below 128 (no signal), and no crash message.
expect_error() {
  local needle=$1; shift
  n=$((n+1))
  "$BIN" "$@" >"$T/out" 2>"$T/err"; local rc=$?
  local lines; lines=$(grep -c . "$T/err")
  if [ $rc -eq 0 ] || [ $rc -ge 128 ] || ! grep -q -- "$needle" "$T/err" || [ "$lines" != 1 ] \
     || grep -q -E "terminate|Segmentation|Aborted|core dumped" "$T/err"; then
    echo "FAIL: lookahead $* -> rc=$rc, stderr:"; sed 's/^/    /' "$T/err"; echo "    (wanted one line containing: $needle)"
    fails=$((fails+1))
  else
    echo "ok: $(head -c 150 "$T/err")"
  fi
}
