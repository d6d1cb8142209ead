"""Acceptance against draft budget: each drafting strategy with fixed draft sizes (--adaptive off) at budgets 1, 2,
4, ..., on a few prompt sets; prints accepted draft tokens per step, the accepted share of drafted tokens and S,
and checks every run's ids against plain decoding. What the adaptive controller learns online (its acceptance
model), measured offline. S and acceptance do not depend on the machine's load.

  python3 launch/bench/bench_budget_acceptance.py MODEL SHARED N_PER_SET MAX_NEW [extra lookahead flags...]
  PLOT=1 also writes acceptance.png (launch/plot.py, with the torch venv's python) into OUT (default build/).
Env: SETS (gsm8k,humaneval), BUDGETS (1,2,4,8,16,32), OUT (build).
Budget flags: prompt lookup --pl-num-tokens b; trie --decoding-length b with --trie-capacity 2048 (the default
capacity of the default 64-node setting: the default capacity is 32 x --decoding-length, which at small budgets
prunes the trie so hard that it drafts almost nothing).
"""
import os, subprocess, sys, tempfile

sys.path.insert(0, os.path.dirname(__file__))
from bench_lib import prompts_file, run  # noqa: E402

model, shared, n, max_new = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
extra = sys.argv[5:] or ["--threads", "1"]
sets = [s for s in os.environ.get("SETS", "gsm8k,humaneval").split(",") if s]
budgets = [int(b) for b in os.environ.get("BUDGETS", "1,2,4,8,16,32").split(",")]
tmp = tempfile.mkdtemp(prefix="la-accept-")
OFF = ["--adaptive", "off"]
flags = {"prompt-lookup": lambda b: ["--pl-num-tokens", str(b)],
         "trie": lambda b: ["--decoding-length", str(b), "--trie-capacity", "2048"]}
lines = [f"model {model}; {n} prompts per set, {max_new} new tokens, greedy, --adaptive off",
         f"{'prompts':12s} {'strategy':14s} {'budget':>6s} {'acc/step':>8s} {'acc/draft':>9s} {'S':>5s} lossless"]
print("\n".join(lines), flush=True)
for ds in sets:
    p = prompts_file(ds, n, tmp, shared)
    _, base = run(model, p, "ar", max_new, tmp, OFF + extra, label="ar")
    for strat, fl in flags.items():
        for b in budgets:
            st, ids = run(model, p, strat, max_new, tmp, OFF + fl(b) + extra, label=f"{strat}-{b}")
            a = st["aggregate"]
            rate = a["mean_accepted"] / a["draft_tokens_per_step"] if a["draft_tokens_per_step"] else 0.0
            line = (f"{ds:12s} {strat:14s} {b:6d} {a['mean_accepted']:8.2f} {rate:9.2f} {a['compression']:5.2f} "
                    f"{'yes' if ids == base else 'NO'}")
            lines.append(line)
            print(line, flush=True)
print("acc/step = accepted draft tokens per step; acc/draft = accepted / drafted tokens; S = new tokens / steps")
if os.environ.get("PLOT") == "1":
    out = os.environ.get("OUT", os.path.join(os.path.dirname(__file__), "..", "..", "build"))
    table = os.path.join(out, "acceptance.txt")
    with open(table, "w") as f:
        f.write("\n".join(lines) + "\n")
    py = os.environ.get("PLOT_PYTHON", sys.executable)
    subprocess.run([py, os.path.join(os.path.dirname(__file__), "..", "plot.py"), "acceptance", table,
                    os.path.join(out, "acceptance.png")], check=False)
