"""fp16/bf16 versus fp32: where greedy outputs first diverge (plain decoding and LADE), per prompt.

Usage: python3 launch/bench/bench_dtype.py SHARED [N_PROMPTS] [MAX_NEW] [--device cuda]
Lossless is exact in fp32. In half precision the forward itself rounds differently from fp32, and a tree step
rounds differently from a chain step, so outputs may drift; this prints where.
"""
import os, sys, tempfile
sys.path.insert(0, os.path.dirname(__file__))
from bench_lib import prompts_file, run

shared = sys.argv[1]
n = int(sys.argv[2]) if len(sys.argv) > 2 else 20
max_new = int(sys.argv[3]) if len(sys.argv) > 3 else 128
extra = sys.argv[4:]
tmp = tempfile.mkdtemp(prefix="la-dtype-")
model = os.path.join(shared, "models/stories260K")
p = prompts_file("tinystories", n, tmp, shared)


def first_div(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


_, ref = run(model, p, "ar", max_new, tmp, ["--dtype", "fp32"] + extra)
print(f"{'dtype':6s} {'strategy':9s} {'identical':>10s} {'first divergence (token index) of the others':s}")
for dt in ["fp32", "bf16", "fp16"]:
    d = os.path.join(tmp, dt)
    os.makedirs(d, exist_ok=True)
    _, ar = run(model, p, "ar", max_new, d, ["--dtype", dt] + extra)
    _, la = run(model, p, "lade", max_new, d, ["--dtype", dt] + extra)
    for name, ids, base, label in [("ar", ar, ref, "vs fp32 ar"), ("lade", la, ar, f"vs {dt} ar")]:
        divs = [first_div(x, y) for x, y in zip(ids, base)]
        same = sum(1 for v in divs if v is None)
        pos = sorted(v for v in divs if v is not None)
        print(f"{dt:6s} {name:9s} {same:4d}/{len(divs):<5d} {label}: {pos if pos else '-'}")
