#!/usr/bin/env bash
# Builds the libFuzzer targets (build-fuzz/: clang-14, ASan + UBSan, la_core only) if needed, replays every seed and
# regression input once, then fuzzes each target for a bounded time. Fails on any crash, sanitizer report, leak,
# uncaught exception, timeout (hang) or memory blow-up; a failing input is saved under build-fuzz/fuzz-artifacts/
# (copy it to tests/fuzz/regressions/<target>/ once the parser is fixed).
#
#   tests/fuzz/run.sh                    # every target, LOOKAHEAD_FUZZ_TIME seconds each (default 20)
#   tests/fuzz/run.sh --time 300 trie_state config_json
#   tests/fuzz/run.sh --replay           # seeds and regressions only (the CTest "fuzz" test)
#
# Options: --time S (fuzzing seconds per target), --replay (no fuzzing), --build DIR (default ROOT/build-fuzz).
# Last line: "fuzz: T targets, N executions in S s (R inputs replayed), F failed".
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
HERE=$ROOT/tests/fuzz
BUILD=$ROOT/build-fuzz
TIME=${LOOKAHEAD_FUZZ_TIME:-20}
REPLAY_ONLY=0
TARGETS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --time) TIME=$2; shift ;;
    --replay) REPLAY_ONLY=1 ;;
    --build) BUILD=$2; shift ;;
    -h|--help) sed -n '2,14p' "${BASH_SOURCE[0]}"; exit 0 ;;
    -*) echo "run.sh: unknown option '$1'" >&2; exit 2 ;;
    *) TARGETS+=("$1") ;;
  esac
  shift
done

if [ ! -f "$BUILD/CMakeCache.txt" ]; then
  CXX_FUZZ=${LOOKAHEAD_FUZZ_CXX:-clang++-14}
  command -v "$CXX_FUZZ" >/dev/null || { echo "run.sh: $CXX_FUZZ not found (launch/setup.sh --test-deps installs clang-14)" >&2; exit 1; }
  mkdir -p "$BUILD"
  cmake -S "$ROOT" -B "$BUILD" -DLOOKAHEAD_FUZZ=ON -DCMAKE_CXX_COMPILER="$CXX_FUZZ" \
        -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$BUILD/configure.log" 2>&1 || { tail -30 "$BUILD/configure.log"; exit 1; }
fi
if ! cmake --build "$BUILD" -j"$(getconf _NPROCESSORS_ONLN)" >"$BUILD/build.log" 2>&1; then
  grep -E -A5 "error" "$BUILD/build.log" | head -40
  echo "run.sh: build failed; full log in $BUILD/build.log" >&2
  exit 1
fi

if [ ${#TARGETS[@]} -eq 0 ]; then
  for f in "$HERE"/fuzz_*.cpp; do n=$(basename "$f" .cpp); TARGETS+=("${n#fuzz_}"); done
fi
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
COMMON=(-timeout=5 -rss_limit_mb=2048 -malloc_limit_mb=2048 -detect_leaks=1)
LOGS=$BUILD/fuzz-logs
ART=$BUILD/fuzz-artifacts
mkdir -p "$LOGS" "$ART"

# One target: its seeds and regressions replayed, then TIME seconds of fuzzing. Writes its report lines to
# $LOGS/<t>.result and "<executions> <replayed> <failed>" to $LOGS/<t>.count.
one_target() {
  local t=$1 bin=$BUILD/tests/fuzz/fuzz_$1 res=$LOGS/$1.result
  exec >"$res"
  if [ ! -x "$bin" ]; then echo "FAIL $t: no target $bin"; echo "0 0 1" >"$LOGS/$t.count"; return; fi
  mkdir -p "$ART/$t"
  # 1. every seed and regression input once, as plain inputs
  local inputs=() d f
  for d in "$HERE/$t" "$HERE/regressions/$t"; do
    [ -d "$d" ] && while IFS= read -r f; do inputs+=("$f"); done < <(find "$d" -type f | sort)
  done
  if [ ${#inputs[@]} -gt 0 ]; then
    if ! timeout 600 "$bin" "${COMMON[@]}" -artifact_prefix="$ART/$t/" "${inputs[@]}" >"$LOGS/$t.replay.log" 2>&1; then
      echo "FAIL $t: a seed or regression input fails (log: $LOGS/$t.replay.log)"
      grep -E "ERROR|SUMMARY|Running:|fuzz:|terminate" "$LOGS/$t.replay.log" | tail -8
      echo "0 0 1" >"$LOGS/$t.count"
      return
    fi
  fi
  if [ $REPLAY_ONLY = 1 ]; then
    echo "ok   $t: ${#inputs[@]} inputs replayed"; echo "0 ${#inputs[@]} 0" >"$LOGS/$t.count"; return
  fi
  # 2. fuzzing for TIME seconds; new inputs go to a corpus kept in the build dir
  local corpus=$BUILD/fuzz-corpus/$t seeds=() rc n
  mkdir -p "$corpus"
  [ -d "$HERE/$t" ] && seeds+=("$HERE/$t")
  [ -d "$HERE/regressions/$t" ] && seeds+=("$HERE/regressions/$t")
  timeout $((TIME + 120)) "$bin" "${COMMON[@]}" -max_total_time="$TIME" -print_final_stats=1 \
      -artifact_prefix="$ART/$t/" "$corpus" "${seeds[@]}" >"$LOGS/$t.log" 2>&1
  rc=$?
  n=$(sed -n 's/^stat::number_of_executed_units: *\([0-9]*\).*/\1/p' "$LOGS/$t.log" | tail -1)
  n=${n:-0}
  if [ $rc -ne 0 ]; then
    echo "FAIL $t: exit $rc after $n executions (log: $LOGS/$t.log; input: $(ls -t "$ART/$t" | head -1))"
    grep -E "ERROR|SUMMARY|fuzz:|terminate|ALARM|out-of-memory" "$LOGS/$t.log" | tail -8
    echo "$n ${#inputs[@]} 1" >"$LOGS/$t.count"
  else
    echo "ok   $t: $n executions in ${TIME} s, corpus $(find "$corpus" -type f | wc -l) inputs"
    echo "$n ${#inputs[@]} 0" >"$LOGS/$t.count"
  fi
}

# Targets run side by side, one per core (LOOKAHEAD_FUZZ_JOBS): libFuzzer is single-threaded, so each target still
# gets TIME seconds of one core, and the whole run takes 1/JOBS of the time (16 targets x 15 s on 2 cores: 262 s,
# 1.15M executions -> 131 s, 1.11M).
JOBS=${LOOKAHEAD_FUZZ_JOBS:-$(getconf _NPROCESSORS_ONLN)}
t_start=$(date +%s)
for t in "${TARGETS[@]}"; do
  rm -f "$LOGS/$t.result" "$LOGS/$t.count"
  while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n; done
  one_target "$t" &
done
wait
failed=0 execs=0 replayed=0
for t in "${TARGETS[@]}"; do
  cat "$LOGS/$t.result" 2>/dev/null
  read -r n r f 2>/dev/null < "$LOGS/$t.count" || { n=0 r=0 f=1; echo "FAIL $t: no result"; }
  execs=$((execs + n)); replayed=$((replayed + r)); failed=$((failed + f))
done
echo "fuzz: ${#TARGETS[@]} targets, $execs executions in $(( $(date +%s) - t_start )) s ($replayed inputs replayed), $failed failed"
[ $failed -eq 0 ]
