#!/usr/bin/env bash
# The layout sweep of launch/strong-scaling.sh at a reduced size (the issue's "runs in CI"): a batch job on 2 real
# MPI ranks as 2x1 (two groups of one rank) and 1x2 (one LP group of two), stories260K, 8 prompts x 16 tokens;
# both layouts must finish, write their CSV rows (measured and modelled job tokens/s, the link latency measured on
# the 2 ranks first) and the PNG chart, and equal one process token for token.
# labels: mpi
# timeout: 600
set -u
BUILD=$1; SRC=$2; SHARED=$3
M=$SHARED/models/stories260K
skip() { echo "SKIP: $*"; exit 77; }
[ -x "$BUILD/lookahead" ] || skip "$BUILD/lookahead is not built"
command -v mpirun >/dev/null || skip "no mpirun"
[ "$(id -u)" = 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMP_NUM_THREADS=1
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
fails=0; n=0
LOOKAHEAD_BUILD=$BUILD "$SRC/launch/strong-scaling.sh" --model "$M" --strategy trie --num-prompts 8 --tokens 16 \
  --threads 1 --layouts 2 --workdir "$T/w" --out "$T/sweep.png" >"$T/out" 2>&1; rc=$?
cat "$T/out" | tail -8
n=$((n+1)); if [ $rc = 0 ]; then echo "ok: sweep exited 0"; else echo "FAIL: sweep rc=$rc"; fails=$((fails+1)); fi
n=$((n+1))
if [ -f "$T/sweep.csv" ] && python3 - "$T/sweep.csv" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
assert sorted(r["layout"] for r in rows) == ["1x2", "2x1"], rows
assert all(r["lossless"] == "yes" and float(r["job_tokens_per_s"]) > 0 for r in rows), rows
assert all(float(r["modelled_job_tokens_per_s"]) > 0 for r in rows), rows
assert all(float(r["link_latency_us"]) > 0 for r in rows), rows  # measured on the 2 ranks, not the 0 default
PY
then echo "ok: CSV has 2x1 and 1x2, both lossless, measured and modelled with a measured link latency"; else echo "FAIL: CSV missing or wrong"; fails=$((fails+1)); fi
n=$((n+1)); if [ -s "$T/sweep.png" ]; then echo "ok: PNG chart"; else echo "FAIL: no PNG chart"; fails=$((fails+1)); fi
echo "test_layout_sweep: $((n - fails))/$n passed"
[ "$fails" -eq 0 ]
