"""Body of launch/bench/bench.sh: every strategy, fixed (--adaptive off) and adaptive (--adaptive on, rows "+a"), on the
shared models and four prompt sets, one table.

Timings on a shared machine are noisy, so tokens/s is per CPU-second of the decoding thread by default (METRIC=cpu,
with --threads 1; METRIC=wall for wall-clock seconds on a quiet machine) and the runs are interleaved: ROUNDS rounds, each running every strategy of a
(model, prompt set) block once in turn; a strategy's ratio to plain decoding is the median over rounds of
(its tokens/s / plain decoding's tokens/s in the same round), and tok/s is the median tokens/s.
Models: stories260K and llama2xs (llama2xs has 256 positions: only the short prompt sets), plus any
BENCH_MODELS="label=path[,label=path]" (launch/bench/bench.sh adds SmolLM2-135M-Instruct when setup.sh has converted it),
STRATEGIES="trie+a,..." to run only some rows."""
import os, statistics, sys, tempfile
sys.path.insert(0, os.path.dirname(__file__))
from bench_lib import prompts_file, run

shared, n_st, n_other, max_new = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
extra = sys.argv[5:]
rounds = int(os.environ.get("ROUNDS", "3"))
# cpu: tokens per CPU-second of the decoding thread (stats cpu_s; needs --threads 1, one compute thread): the time
# other processes take the core is not counted, so a machine shared with builds still gives stable ratios.
# wall: tokens per wall-clock second of decoding (a quiet machine).
metric = os.environ.get("METRIC", "cpu")
if metric == "cpu" and "--threads" not in extra:
    extra = list(extra) + ["--threads", "1"]
tmp = tempfile.mkdtemp(prefix="la-bench-")
models = [("stories260K", os.path.join(shared, "models/stories260K"), 512),
          ("llama2xs", os.path.join(shared, "models/llama2xs"), 256)]
for spec in filter(None, os.environ.get("BENCH_MODELS", "").split(",")):
    label, path = spec.split("=", 1)
    models.append((label, path, 2048))
only_models = set(filter(None, os.environ.get("MODELS", "").split(",")))
sets = [("tinystories", n_st), ("gsm8k", n_other), ("humaneval", n_other), ("cnn-dm", n_other)]
only_sets = set(filter(None, os.environ.get("SETS", "").split(",")))
long_sets = {"humaneval", "cnn-dm"}  # 300-650 characters: need more than 256 positions
W5 = ["--window", "5", "--ngram", "4", "--guesses", "5"]
OFF, ON = ["--adaptive", "off"], ["--adaptive", "on"]
# (label, strategy, options): defaults, a small LADE window that suits a CPU, each fixed and adaptive
strategies = [("ar", "ar", OFF)]
for name, strat, opts in [("jacobi", "jacobi", []), ("lade", "lade", []), ("lade-W5N4G5", "lade", W5),
                          ("trie", "trie", []), ("prompt-lookup", "prompt-lookup", []), ("suffix", "suffix", [])]:
    strategies += [(name, strat, opts + OFF), (name + "+a", strat, opts + ON)]
if os.environ.get("OUROBOROS") == "1":  # slow on CPU: the draft model is as large as the target
    dm = ["--draft-model", os.path.join(shared, "models/llama2xs")]
    strategies += [("ouroboros", "ouroboros", dm + OFF), ("ouroboros+a", "ouroboros", dm + ON)]
# STRATEGIES="ar,trie+a,...": only these rows (plain decoding always runs: every ratio is to it).
only_strats = set(filter(None, os.environ.get("STRATEGIES", "").split(",")))
if only_strats:
    strategies = [x for x in strategies if x[0] == "ar" or x[0] in only_strats]

print(f"rounds {rounds} (interleaved), {max_new} new tokens, greedy; tok/s per {metric} second of decoding; "
      f"{' '.join(extra) or 'cpu fp32'}")
print(f"{'model':12s} {'prompts':13s} {'strategy':16s} {'S':>5s} {'tok/s':>8s} {'x AR':>5s} {'x fixed':>7s} "
      f"{'x best':>6s} {'tok/step':>8s} {'plain%':>6s} {'budgets (chosen: steps%)':40s} lossless")
for mname, mpath, ctx in models:
    if only_models and mname not in only_models:
        continue
    for ds, n in sets:
        if (only_sets and ds not in only_sets) or (ctx < 512 and ds in long_sets):
            continue
        p = prompts_file(ds, n, tmp, shared)
        res = {s: [] for s, _, _ in strategies}
        base_ids, failed = None, set()
        for r in range(rounds):
            for s, strat, sx in strategies:
                if s.startswith("ouroboros") and mname != "stories260K" or s in failed:
                    continue
                try:
                    st, ids = run(mpath, p, strat, max_new, tmp, list(sx) + extra, label=s)
                except SystemExit as e:
                    print(f"{mname:12s} {ds:13s} {s:16s} failed: {str(e).splitlines()[-1]}")
                    failed.add(s)
                    continue
                a = st["aggregate"]
                dec = a["cpu_s"] if metric == "cpu" and "cpu_s" in a else a["seconds"] - a["prefill_s"]
                tps = a["new_tokens"] / max(1e-9, dec)
                if s == "ar":
                    base_ids = ids
                res[s].append((tps, st, ids))
        for s, strat, sx in strategies:
            if not res[s]:
                continue
            n_r = min(len(res[s]), len(res["ar"]))
            ratio = statistics.median(res[s][i][0] / res["ar"][i][0] for i in range(n_r))
            fixed = s[:-2] if s.endswith("+a") else None
            xf = (statistics.median(res[s][i][0] / res[fixed][i][0] for i in range(min(n_r, len(res[fixed]))))
                  if fixed and res.get(fixed) else float("nan"))
            # the target for the default: its tokens/s over the better of its fixed drafts and plain
            # decoding, round by round (the adaptive rows only)
            xb = (statistics.median(res[s][i][0] / max(res[fixed][i][0], res["ar"][i][0])
                                    for i in range(min(n_r, len(res[fixed]))))
                  if fixed and res.get(fixed) else float("nan"))
            tps = statistics.median(x[0] for x in res[s])
            st = res[s][-1][1]
            a = st["aggregate"]
            ad = st.get("adaptive")
            plain = f"{100 * ad['plain_fraction']:6.1f}" if ad else f"{'-':>6s}"
            hist = ""
            if ad:
                tot = max(1, ad["steps"])
                top = sorted(ad["budget_hist"].items(), key=lambda kv: -kv[1])[:4]
                hist = " ".join(f"{b}:{100 * v / tot:.0f}" for b, v in sorted(top, key=lambda kv: int(kv[0])))
            lossless = all(x[2] == base_ids for x in res[s])
            print(f"{mname:12s} {ds:13s} {s:16s} {a['compression']:5.2f} {tps:8.1f} {ratio:5.2f} {xf:7.2f} {xb:6.2f} "
                  f"{a['step_tokens_per_step']:8.1f} {plain} {hist:40s} {'yes' if lossless else 'NO'}", flush=True)
print("S = new tokens / forward steps; tok/s = median over rounds; x AR, x fixed = median over rounds of the "
      "tokens/s ratio to plain decoding / to the same strategy with --adaptive off, in the same round; x best = median over rounds of the adaptive row's tokens/s over the better of its fixed row and plain decoding in that round; tok/step = "
      "plan tokens per forward; plain% = adaptive steps that fell back to plain decoding; budgets = the most chosen "
      "draft budgets (verify tokens) with their share of steps (last round).")
