#!/usr/bin/env bash
# Static checks of the built CUDA kernels (no GPU needed): `cuobjdump --dump-resource-usage` on libla_kernels.a.
#  * SASS for sm_80 and sm_90 present in every object (the build's targets; nothing needs sm_90a features);
#  * every step attention configuration compiled for both: 4 head dims x 2 row tiles x (fp32 scalar, fp16/bf16
#    scalar (the default, batch-invariant path) and fp16/bf16 WMMA (fast_mma)) = 40;
#  * no register spills and no stack (LOCAL:0, STACK:0) in any kernel;
#  * registers within what the launch assumes: <= 255 everywhere, and the 16-row attention tiles <= 128 so that
#    4 resident CTAs of 128 threads per SM (the occupancy the 16-row tile is sized for) fit the 64 Ki registers;
#  * the fixed-configuration GEMM (gemm_rows.cu) compiled in its 3 element types for both, and <= 128 registers
#    (4 CTAs of 128 threads per SM at least: a decode GEMM is memory-bound and needs warps in flight).
# cuobjdump is not in the toolkit here: it comes from PyPI (nvidia-cuda-cuobjdump, CUDA 13, installed into the
# torch venv by launch/setup.sh --test-deps; triton ships one too). CUOBJDUMP=path overrides.
# labels: cuda-static
# timeout: 120
set -u
BUILD=$1; SRC=$2
LIB=$BUILD/src/backend/cuda/kernels/libla_kernels.a
if [ ! -f "$LIB" ]; then echo "skip: no CUDA kernels in this build ($LIB)"; exit 77; fi
DEPS=${LOOKAHEAD_DEPS:-$HOME/.cache/lookahead}
CUOBJDUMP=${CUOBJDUMP:-}
for c in "$CUOBJDUMP" "$DEPS"/*/lib/python3*/site-packages/nvidia/cu13/bin/cuobjdump \
         "$(command -v cuobjdump)" "$DEPS"/*/lib/python3*/site-packages/triton/backends/nvidia/bin/cuobjdump; do
  if [ -n "$c" ] && [ -x "$c" ]; then CUOBJDUMP=$c; break; fi
done
if [ -z "$CUOBJDUMP" ] || [ ! -x "$CUOBJDUMP" ]; then
  echo "FAIL: no cuobjdump (run launch/setup.sh --test-deps, or set CUOBJDUMP)"; exit 1
fi
echo "cuobjdump: $CUOBJDUMP ($("$CUOBJDUMP" --version | tail -1))"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
"$CUOBJDUMP" --dump-resource-usage "$LIB" > "$T/usage.txt" 2>&1 || { echo "FAIL: cuobjdump failed"; cat "$T/usage.txt"; exit 1; }
python3 - "$T/usage.txt" <<'PY'
import re, sys
member = arch = None
funcs = {}  # (member, arch) -> {name: {REG, STACK, LOCAL, SHARED}}
name = None
for line in open(sys.argv[1]):
    m = re.match(r"member .*:(\S+\.o):", line)
    if m: member, arch = m.group(1), None; continue
    m = re.match(r"arch = (sm_\d+a?)", line)
    if m: arch = m.group(1); continue
    m = re.match(r"\s*Function (\S+):", line)
    if m: name = m.group(1); continue
    if name and "REG:" in line:
        funcs.setdefault((member, arch), {})[name] = {k: int(v) for k, v in re.findall(r"(\w+):(\d+)", line)}
        name = None
fails = []
def check(ok, what):
    print(("ok: " if ok else "FAIL: ") + what)
    if not ok: fails.append(what)
members = sorted({m for m, _ in funcs})
check(len(members) >= 5, f"{len(members)} kernel objects: {' '.join(members)}")
for mem in members:
    archs = sorted(a for m, a in funcs if m == mem)
    check({"sm_80", "sm_90"} <= set(archs), f"{mem}: SASS for {' '.join(archs)}")
for arch in ("sm_80", "sm_90"):
    attn = [n for (m, a), fs in funcs.items() if a == arch for n in fs if "step_attention_kernel" in n]
    # _Z...step_attention_kernelI<E>Li<DP>ELi<BM>ELb<MMA>EEv...: DP {16, 64, 80, 128} x BM {16, 64} x
    # (E, MMA) in {(f, 0), (__half, 0), (__half, 1), (__nv_bfloat16, 0), (__nv_bfloat16, 1)}
    cfgs = {(re.search(r"kernelI(\w+?)Li(\d+)ELi(\d+)ELb([01])E", n).groups()) for n in attn}
    check(len(cfgs) == 40, f"{arch}: {len(cfgs)} step attention configurations (want 40)")
    scalar16 = {c for c in cfgs if c[0] != "f" and c[3] == "0"}
    check(len(scalar16) == 16, f"{arch}: {len(scalar16)} scalar fp16/bf16 configurations (want 16)")
    gemm = {n for (m, a), fs in funcs.items() if a == arch and m == "gemm_rows.cu.o" for n in fs if "gemm_rows_kernel" in n}
    check(len(gemm) == 3, f"{arch}: {len(gemm)} gemm_rows kernels in gemm_rows.cu.o (want 3: f32, f16, bf16)")
worst = {}
for (mem, arch), fs in funcs.items():
    for n, r in fs.items():
        short = re.sub(r"_GLOBAL__N__\w+?_", "", n)[:90]
        if r.get("LOCAL", 0) or r.get("STACK", 0):
            fails.append(f"{arch} {short}: LOCAL {r.get('LOCAL')} STACK {r.get('STACK')} (spills)")
            print("FAIL:", fails[-1])
        limit = 255
        if "step_attention_kernel" in n and re.search(r"ELi16ELb[01]EEv", n): limit = 128
        if "gemm_rows_kernel" in n: limit = 128
        if r["REG"] > limit:
            fails.append(f"{arch} {short}: {r['REG']} registers > {limit}"); print("FAIL:", fails[-1])
        worst[arch] = max(worst.get(arch, 0), r["REG"])
n = sum(len(fs) for fs in funcs.values())
check(n > 0 and not [f for f in fails if "spills" in f or "registers" in f],
      f"{n} kernel entries: no spills, no stack, registers within limits (most: {worst})")
sys.exit(1 if fails else 0)
PY
