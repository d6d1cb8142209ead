#!/usr/bin/env bash
# The folder layering (docs/architecture.md, tests/scripts/layering.py): no folder of src/ or include/lookahead/
# includes one above it or a peer backend, and only the engine and the CUDA backend include ATen. Negative
# controls: copies of the tree with one bad include each (model including the CPU backend: the include cycle of
# issue 33; the CPU backend including the CUDA backend; util including io; parallel including dist) must fail the
# check.
# labels: core
# timeout: 60
set -u
BUILD=$1; SRC=$2
fails=0; n=0
check() { n=$((n+1)); if eval "$2"; then echo "ok: $1"; else echo "FAIL: $1"; fails=$((fails+1)); fi; }

python3 "$SRC/tests/scripts/layering.py" "$SRC"; rc=$?
check "the tree keeps its layering (rc=$rc)" "[ $rc -eq 0 ]"

T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
mutate() {  # mutate NAME FILE INCLUDE-LINE: a copy of src/ and include/ with the line appended to FILE
  rm -rf "$T/$1"; mkdir -p "$T/$1"; cp -r "$SRC/src" "$SRC/include" "$T/$1/"
  echo "$3" >> "$T/$1/$2"
  python3 "$SRC/tests/scripts/layering.py" "$T/$1" > "$T/$1.log" 2>&1
}
mutate model src/model/config.cpp '#include "lookahead/backend/cpu/gemm.h"'; rc=$?
check "negative control: model including the CPU backend fails (rc=$rc)" "[ $rc -ne 0 ] && grep -q 'model includes backend/cpu' '$T/model.log'"
mutate peer src/backend/cpu/gemm.cpp '#include "lookahead/backend/cuda/step_layout.h"'; rc=$?
check "negative control: a backend including another fails (rc=$rc)" "[ $rc -ne 0 ] && grep -q 'backend/cpu includes backend/cuda' '$T/peer.log'"
mutate util src/util/files.cpp '#include "lookahead/io/prompt_records.h"'; rc=$?
check "negative control: util including io fails (rc=$rc)" "[ $rc -ne 0 ] && grep -q 'util includes io' '$T/util.log'"
mutate aten src/decode/executor.cpp '#include <ATen/ATen.h>'; rc=$?
check "negative control: decode including ATen fails (rc=$rc)" "[ $rc -ne 0 ] && grep -q 'decode includes ATen' '$T/aten.log'"
mutate dist src/parallel/partition.cpp '#include "lookahead/dist/comm.h"'; rc=$?
check "negative control: parallel including dist (MPI) fails (rc=$rc)" "[ $rc -ne 0 ] && grep -q 'parallel includes dist' '$T/dist.log'"
echo "$((n-fails)) passed, $fails failed"
[ $fails -eq 0 ]
