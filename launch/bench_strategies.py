"""Body of launch/bench.sh: every strategy, both shared models, two prompt sets, one table."""
import json, os, sys, tempfile
sys.path.insert(0, os.path.dirname(__file__))
from bench_lib import prompts_file, run

shared, n_st, n_other, max_new = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
extra = sys.argv[5:]
tmp = tempfile.mkdtemp(prefix="la-bench-")
models = [("stories260K", os.path.join(shared, "models/stories260K")),
          ("llama2xs", os.path.join(shared, "models/llama2xs"))]
sets = [("tinystories", n_st), ("gsm8k", n_other)]
# (label, strategy, options): defaults, plus a small LADE window that suits a CPU (compute-bound forward)
strategies = [("ar", "ar", []), ("jacobi", "jacobi", []), ("lade", "lade", []),
              ("lade-W5N4G5", "lade", ["--window", "5", "--ngram", "4", "--guesses", "5"]), ("trie", "trie", []),
              ("prompt-lookup", "prompt-lookup", []),
              ("ouroboros", "ouroboros", ["--draft-model", os.path.join(shared, "models/llama2xs")])]
print(f"{'model':12s} {'prompts':12s} {'strategy':14s} {'S':>6s} {'acc/step':>8s} {'tok/s':>8s} {'x AR':>6s} "
      f"{'x LADE':>6s} {'draft us':>9s} {'verify us':>9s} {'commit us':>9s} {'fwd ms':>7s} {'tok/step':>8s} lossless")
for mname, mpath in models:
    for ds, n in sets:
        p = prompts_file(ds, n, tmp, shared)
        base = None
        lade_tps = None
        for s, strat, sx in strategies:
            if s == "ouroboros" and mname != "stories260K":
                continue  # llama2xs is the draft model
            try:
                st, ids = run(mpath, p, strat, max_new, tmp, list(sx) + extra, label=s)
            except SystemExit as e:
                print(f"{mname:12s} {ds:12s} {s:14s} failed: {str(e).splitlines()[-1]}")
                continue
            a = st["aggregate"]
            dec = a["seconds"] - a["prefill_s"]
            tps = a["new_tokens"] / dec
            if s == "ar":
                base = (tps, ids)
            if s == "lade":
                lade_tps = tps
            steps = max(1, a["steps"])
            print(f"{mname:12s} {ds:12s} {s:14s} {a['compression']:6.2f} {a['mean_accepted']:8.2f} {tps:8.1f} "
                  f"{tps / base[0]:6.2f} {(tps / lade_tps if lade_tps else float('nan')):6.2f} "
                  f"{1e6 * a['draft_s'] / steps:9.1f} {1e6 * a['verify_s'] / steps:9.1f} {1e6 * a['commit_s'] / steps:9.1f} "
                  f"{1e3 * a['forward_s'] / steps:7.3f} {a['step_tokens_per_step']:8.1f} "
                  f"{'yes' if ids == base[1] else 'NO'}")
print("S = new tokens / forward steps; acc/step = accepted draft tokens per step; x AR, x LADE = tokens/s ratios "
      "measured in this run; draft/verify us = CPU time per step for planning+updating draft state / verifying; commit us = KV commit; tok/step = tokens in each forward.")
