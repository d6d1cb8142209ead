"""Parts 2 and 3 of launch/demo.sh: measurements a reader can trust on a machine shared with other work.

  demo_measure.py strategies OUT MODEL PROMPTS MAX_NEW ROUNDS STRATEGY...
      A warm-up run of every strategy (1 prompt, 8 tokens, not counted), then ROUNDS interleaved rounds, each
      running plain decoding and every strategy once on PROMPTS. Tokens/s is per CPU-second of the decoding thread
      (`cpu_s` of --stats-json, --threads 1): time other processes take from the core is not counted, so the
      numbers hold on a busy machine too. A strategy's ratio is the median over rounds of its tokens/s over plain
      decoding's in the same round; it is printed only when it is outside the run-to-run spread of plain decoding
      itself (max - min over the rounds, relative to the median) and every round's ratio is on the same side of
      1; otherwise `~1.0`. Writes OUT/spread.txt for part 3.
  demo_measure.py batch OUT MODEL PROMPTS MAX_NEW
      Related tasks in ONE process with the trie (its branches from earlier answers draft the later ones): adaptive
      (the default) and with fixed 3-token drafts, then the same tasks with plain decoding: per task S, tokens/s,
      the ratio to plain decoding (shown only outside part 2's measured spread, `~1.0` otherwise).
"""
import json, os, statistics, sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "bench"))
from bench_lib import run  # noqa: E402

T1 = ["--threads", "1"]


def tps(stats):
    a = stats["aggregate"]
    return a["new_tokens"] / max(1e-9, a["cpu_s"])


def fmt_ratio(r, rounds, spread):
    if spread is None or len(rounds) < 2:
        return "~1.0"
    same_side = all(x > 1 for x in rounds) or all(x < 1 for x in rounds)
    return f"{r:.2f}" if abs(r - 1) > spread and same_side else "~1.0"


def strategies(out, model, prompts, max_new, n_rounds, names):
    names = ["ar"] + [s for s in names if s != "ar"]
    warm = os.path.join(out, "warm.jsonl")
    with open(prompts) as f, open(warm, "w") as w:
        w.write(f.readline())
    for s in names:  # warm-up: page cache, allocator, CPU clocks; not counted (fixed drafts: no calibration)
        run(model, warm, s, 4, out, T1 + ["--adaptive", "off"], label="warm-" + s)
    res = {s: [] for s in names}
    for r in range(n_rounds):
        for s in names:
            st, ids = run(model, prompts, s, max_new, out, T1, label=s)
            res[s].append((tps(st), st, ids))
    ar = [x[0] for x in res["ar"]]
    med = statistics.median(ar)
    spread = (max(ar) - min(ar)) / med if n_rounds >= 2 else None
    print(f"{'strategy':15s} {'S':>5s} {'tok/s':>7s} {'x plain':>8s}  {'draft budget (most steps)':26s} lossless")
    for s in names:
        rows = res[s]
        ratios = [rows[i][0] / res["ar"][i][0] for i in range(n_rounds)]
        a = rows[-1][1]["aggregate"]
        ad = rows[-1][1].get("adaptive")
        bud = "-"
        if ad and ad["budget_hist"]:
            b, n = max(ad["budget_hist"].items(), key=lambda kv: kv[1])
            bud = f"{b} ({100 * n / max(1, ad['steps']):.0f}% of steps)"
        ratio = "1.00" if s == "ar" else fmt_ratio(statistics.median(ratios), ratios, spread)
        lossless = all(x[2] == res["ar"][0][2] for x in rows)
        print(f"{s:15s} {a['compression']:5.2f} {statistics.median(x[0] for x in rows):7.1f} {ratio:>8s}  {bud:26s} "
              f"{'yes' if lossless else 'NO'}")
    if spread is None:
        print("(one round: no run-to-run spread measured, so no ratio is shown)")
    else:
        print(f"spread: plain decoding ran at {min(ar):.1f}-{max(ar):.1f} tokens/s over {n_rounds} rounds "
              f"(a spread of {100 * spread:.0f}%); a ratio within {100 * spread:.0f}% of 1, or with rounds on both sides of 1, "
              f"prints ~1.0")
        with open(os.path.join(out, "spread.txt"), "w") as f:
            f.write(f"{spread}\n")


def batch(out, model, prompts, max_new):
    # The trie as users get it (adaptive budgets under the default 64-node decoding length), and with fixed
    # 3-token drafts. --trie-capacity keeps the default capacity of the 64-node setting: the default capacity is
    # 32 x --decoding-length, and 96 nodes would prune the earlier answers before the later tasks could use them.
    runs = [("trie-batch", "trie", T1), ("trie3-batch", "trie",
             T1 + ["--adaptive", "off", "--decoding-length", "3", "--trie-capacity", "2048"]), ("ar-batch", "ar", T1)]
    recs = {}
    for label, strat, opts in runs:
        run(model, prompts, strat, max_new, out, opts, label=label)
        path = os.path.join(out, f"{os.path.basename(model.rstrip('/'))}-{os.path.basename(prompts)}-{label}.jsonl")
        recs[label] = [json.loads(l) for l in open(path)]
    asks = [json.loads(l) for l in open(prompts)]
    spread = None
    if os.path.exists(os.path.join(out, "spread.txt")):
        spread = float(open(os.path.join(out, "spread.txt")).read())

    def rate(r):
        return r["new_tokens"] / max(1e-9, r["stats"]["cpu_s"])

    def ratio(x):
        return f"{x:.2f}" if spread is not None and abs(x - 1) > spread else "~1.0"

    print(f"{'':2s} {'':40s} {'trie (default: adaptive)':>24s} {'trie, fixed 3-token drafts':>26s} {'plain':>7s}")
    print(f"{'#':>2s} {'task: Write a Python function that ...':40s} {'S':>5s} {'tok/s':>7s} {'x plain':>8s}  "
          f"{'S':>5s} {'tok/s':>7s} {'x plain':>8s}   {'tok/s':>6s} lossless")
    for i, q in enumerate(asks):
        ask = q["messages"][0]["content"].replace("Write a Python function that ", "").rstrip(".")
        a, f, p = recs["trie-batch"][i], recs["trie3-batch"][i], recs["ar-batch"][i]
        same = a["ids"] == p["ids"] and f["ids"] == p["ids"]
        print(f"{i + 1:2d} {ask[:40]:40s} {a['new_tokens'] / max(1, a['steps']):5.2f} {rate(a):7.1f} "
              f"{ratio(rate(a) / rate(p)):>8s}  {f['new_tokens'] / max(1, f['steps']):5.2f} {rate(f):7.1f} "
              f"{ratio(rate(f) / rate(p)):>8s}   {rate(p):6.1f} {'yes' if same else 'NO'}")
    n = len(asks)
    if n >= 2:
        h = n // 2
        for label, name in (("trie-batch", "adaptive"), ("trie3-batch", "fixed 3-token drafts")):
            rs = recs[label]
            s1 = sum(x["new_tokens"] for x in rs[:h]) / max(1, sum(x["steps"] for x in rs[:h]))
            s2 = sum(x["new_tokens"] for x in rs[h:]) / max(1, sum(x["steps"] for x in rs[h:]))
            print(f"S over the first {h} tasks {s1:.2f}, over the last {n - h} {s2:.2f} (trie, {name})")


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "strategies":
        strategies(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), int(sys.argv[6]), sys.argv[7:])
    elif cmd == "batch":
        batch(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
    else:
        raise SystemExit(f"unknown command {cmd}")
