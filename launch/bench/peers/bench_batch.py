"""Body of launch/bench/peers/bench-batch.sh (its header says what it measures and how). Prints a table after every round."""
import json, os, re, statistics, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
import prompt_sets  # noqa: E402

BIN, MODEL, SHARED = os.environ["LOOKAHEAD_BIN"], os.environ["MODEL"], os.environ["SHARED"]
THREADS, N, ROUNDS, MAX_NEW = (int(os.environ[k]) for k in ("THREADS", "N", "ROUNDS", "MAX_NEW"))
BATCHES = sorted({int(b) for b in os.environ["BATCHES"].split(",") if b})
SETS = [s for s in os.environ["SETS"].split(",") if s]
DTYPE = {"f32": "fp32", "bf16": "bf16"}[os.environ["DTYPE"]]
LLAMA_BIN, GGUF, CHART = os.environ.get("LLAMA_BIN", ""), os.environ.get("GGUF", ""), os.environ.get("CHART", "")
ENGINES = [("plain", ["--strategy", "ar"]), ("draft", ["--strategy", "suffix"])]


def ours(name, prompts, chat, batch, extra, tmp):
    out = os.path.join(tmp, f"{name}-{batch}-{extra[1]}.jsonl")
    stats = out + ".stats.json"
    cmd = [BIN, "generate", "--model", MODEL, "--input", prompts, "--output", out, "--overwrite", "--quiet",
           "--stats-json", stats,
           "--max-new-tokens", str(MAX_NEW), "--threads", str(THREADS), "--dtype", DTYPE, "--batch", str(batch),
           *(["--chat"] if chat else []), *extra]
    t0 = time.monotonic()
    r = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.monotonic() - t0
    if r.returncode != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}\n{r.stderr}")
    recs = [json.loads(l) for l in open(out)]
    agg = json.load(open(stats))["aggregate"]  # the request loop: prompts and decoding, not load or calibration
    toks = sum(x["new_tokens"] for x in recs)
    lat = sorted(x["seconds"] for x in recs)
    ids = {json.dumps(x["id"]): x["ids"] for x in recs}
    return {"tps": toks / agg["seconds"], "wall_tps": toks / wall, "p50": lat[len(lat) // 2], "p95": lat[min(len(lat) - 1, int(0.95 * len(lat)))],
            "ids": ids, "prompt_tokens": statistics.mean(len(x["prompt_ids"]) for x in recs),
            "new_tokens": statistics.mean(x["new_tokens"] for x in recs)}


def llama(batch, npp, ntg):
    cmd = [os.path.join(LLAMA_BIN, "llama-batched-bench"), "-m", GGUF, "-npp", str(npp), "-ntg", str(ntg),
           "-npl", str(batch), "-t", str(THREADS), "-c", str((npp + ntg) * batch + 64)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}\n{r.stderr[-2000:]}")
    # |    PP |     TG |    B |   N_KV |   T_PP s | S_PP t/s |   T_TG s | S_TG t/s |      T s |    S t/s |
    for line in r.stdout.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 10 and cells[2] == str(batch) and re.match(r"^[0-9.]+$", cells[7]):
            # generated tokens over prompt processing + generation (as ours: the request loop's time)
            total_s = float(cells[8])
            return {"tps": batch * ntg / total_s, "p50": total_s, "p95": total_s, "tg_tps": float(cells[7])}
    raise SystemExit(f"bench-batch: no result row in llama-batched-bench output:\n{r.stdout[-2000:]}")


def spread(xs, f="{:.1f}"):
    if not xs:
        return "-"
    return f"{f.format(statistics.median(xs))} [{f.format(min(xs))}-{f.format(max(xs))}]"


def main():
    tmp = tempfile.mkdtemp(prefix="bench-batch-")
    sets = {}
    for s in prompt_sets.check(SETS):
        recs = prompt_sets.load(s, N, SHARED)
        path = os.path.join(tmp, f"{s}.jsonl")
        with open(path, "w") as f:
            for r in recs:
                f.write(json.dumps({"id": r["id"], "prompt": r["text"]}) + "\n")
        sets[s] = (path, all(r["kind"] == "chat" for r in recs))
    print(f"# bench-batch: {os.path.basename(MODEL)} {DTYPE}, {THREADS} threads, {N} prompts per set, {MAX_NEW} new "
          f"tokens, B = {BATCHES}, {ROUNDS} round(s); engine {BIN}; peer {LLAMA_BIN or 'none'}", flush=True)
    res = {}  # (set, B, engine) -> [run dicts]
    ref = {}  # set -> ids of plain decoding at the smallest B (--batch 1 when B = 1 is in the list)
    mismatches = []
    for rnd in range(ROUNDS):
        for s, (path, chat) in sets.items():
            for b in BATCHES:
                # ABBA: the engines swap order every round, so whichever runs second in a pair (on this VM it can
                # differ by a few percent for no reason of its own) is not always the same engine.
                for eng, extra in (ENGINES if rnd % 2 == 0 else ENGINES[::-1]):
                    r = ours(s, path, chat, b, extra, tmp)
                    if s not in ref and b == BATCHES[0] and eng == "plain":
                        ref[s] = r["ids"]
                    if s in ref and r["ids"] != ref[s]:
                        mismatches.append(f"{s} B={b} {eng}")
                    res.setdefault((s, b, eng), []).append(r)
                    res[(s, "lens")] = (round(r["prompt_tokens"]), max(1, round(r["new_tokens"])))
                if LLAMA_BIN:
                    npp, ntg = res[(s, "lens")]
                    res.setdefault((s, b, "llama.cpp"), []).append(llama(b, npp, ntg))
        report(res, sets, rnd + 1, mismatches)
    if CHART:
        chart(res, sets)


def report(res, sets, rounds, mismatches):
    print(f"\n## after round {rounds}: job tokens/s (generated tokens over the time of prompts + decoding; load and "
          "calibration excluded), median [min-max]; p50/p95 request latency (s, ours: each request from admission "
          "to its record; llama.cpp: the batch's time)")
    print("| set | B | ours plain | ours drafting (suffix) | llama.cpp batched | plain / llama.cpp | drafting / plain "
          "| plain p50/p95 | drafting p50/p95 |")
    print("|---|---|---|---|---|---|---|---|---|")
    for s in sets:
        base = statistics.median(r["tps"] for r in res[(s, BATCHES[0], "plain")])
        for b in BATCHES:
            p = [r["tps"] for r in res[(s, b, "plain")]]
            dr = [r["tps"] for r in res[(s, b, "draft")]]
            ll = [r["tps"] for r in res.get((s, b, "llama.cpp"), [])]
            ratio = [x / y for x, y in zip(p, ll)] if ll else []
            dratio = [x / y for x, y in zip(dr, p)]
            lp = res[(s, b, "plain")][-1]
            ld = res[(s, b, "draft")][-1]
            print(f"| {s} | {b} | {spread(p)} | {spread(dr)} | {spread(ll)} | "
                  f"{spread(ratio, '{:.2f}')} | {spread(dratio, '{:.2f}')} | "
                  f"{lp['p50']:.1f}/{lp['p95']:.1f} | {ld['p50']:.1f}/{ld['p95']:.1f} |")
        if len(BATCHES) > 1:  # the scaling row: the largest B against the smallest
            print(f"|  | x B={BATCHES[0]} |  |  |  | plain at B={BATCHES[-1]}: "
                  f"{statistics.median(r['tps'] for r in res[(s, BATCHES[-1], 'plain')]) / base:.2f}x B={BATCHES[0]} |  |  |  |")
    print(f"ids equal to plain decoding at --batch {BATCHES[0]} in every row" if not mismatches else
          "IDS DIFFER: " + ", ".join(mismatches), flush=True)


def chart(res, sets):
    lines = []
    for s in sets:
        for eng in ("plain", "draft", "llama.cpp"):
            for b in BATCHES:
                rs = res.get((s, b, eng))
                if rs:
                    lines.append(f"{s} {eng} {b} {statistics.median(r['tps'] for r in rs):.2f}")
    table = os.path.join(tempfile.mkdtemp(), "batch.txt")
    open(table, "w").write("\n".join(lines) + "\n")
    subprocess.check_call([sys.executable, os.path.join(os.path.dirname(__file__), "..", "..", "plot.py"), "batch", table, CHART])


if __name__ == "__main__":
    main()
