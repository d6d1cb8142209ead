"""The default strategy (no --strategy: suffix drafting with the adaptive controller) against plain decoding
(--strategy ar), in interleaved rounds of one run, on the cases where drafting is most likely to lose:

  tiny     stories260K, every forward mostly overhead (50 us a step; a T-token step costs about T plain steps), so the
           strategy's bookkeeping and any draft are pure cost: the controller's ledger must keep the default within
           5% of plain decoding (issue: "a default that drafts").
  batch    SmolLM2 with many requests in flight (--batch B): a compute-bound step, where extra rows cost nearly their
           share; drafting inside a batch must not fall below plain (issue: batch jobs).
  single   SmolLM2, one request at a time (--batch 1): where drafting pays.

Usage: python3 bench_default.py CASES ROUNDS (env: LOOKAHEAD_BIN, SHARED, N_TINY, N_SMOL, MAX_NEW, B, THREADS,
SMOL_MODEL). Prints one row per case and set: tokens/s of both (median [min-max] over rounds), the ratio per round,
and whether every record's ids were equal. Only ratios of one run mean anything on a shared VM.
"""
import json, os, statistics, subprocess, sys, tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import prompt_sets  # noqa: E402

BIN = os.environ.get("LOOKAHEAD_BIN", "build/lookahead")
SHARED = os.environ.get("SHARED", "../shared")
THREADS = os.environ.get("THREADS", "2")
SMOL = os.environ.get("SMOL_MODEL", "SmolLM2-135M-Instruct.gguf")


def write_prompts(path, name, n, base):
    with open(path, "w") as f:
        for p in prompt_sets.load(name, n, SHARED, base=base):
            f.write(json.dumps(prompt_sets.engine_record(p)) + "\n")


def run(model, prompts, extra, work, tag, threads):
    out, st = os.path.join(work, tag + ".jsonl"), os.path.join(work, tag + ".json")
    cmd = [BIN, "generate", "--model", model, "--input", prompts, "--output", out, "--overwrite", "--quiet",
           "--stats-json", st, "--threads", threads] + extra
    subprocess.run(cmd, check=True)
    agg = json.load(open(st))["aggregate"]
    ids = {json.dumps(r["id"]): r["ids"] for r in map(json.loads, open(out))}
    return agg["new_tokens"] / agg["seconds"], ids, json.load(open(st)).get("adaptive", {})


def case_rows(case):
    n_tiny, n_smol = int(os.environ.get("N_TINY", "400")), int(os.environ.get("N_SMOL", "24"))
    max_new, b = os.environ.get("MAX_NEW", "64"), os.environ.get("B", "16")
    tiny = os.path.join(SHARED, "models", "stories260K")
    if case == "tiny":
        return [("tinystories", tiny, n_tiny, True, ["--batch", "1", "--max-new-tokens", "200"], "1")]
    if case == "batch":
        return [(s, SMOL, n_smol, False, ["--batch", b, "--max-new-tokens", max_new], THREADS)
                for s in ("humaneval", "mt-bench", "gsm8k")]
    if case == "single":
        return [(s, SMOL, 8, False, ["--batch", "1", "--max-new-tokens", max_new], THREADS)
                for s in ("humaneval", "mt-bench")]
    raise SystemExit(f"bench_default: unknown case '{case}' (tiny, batch, single)")


def main():
    cases, rounds = sys.argv[1].split(","), int(sys.argv[2])
    print("| case | set | args | plain tok/s | default tok/s | default / plain per round | ids equal | default slept |")
    print("|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as work:
        for case in cases:
            for name, model, n, base, extra, threads in case_rows(case):
                prompts = os.path.join(work, f"{case}-{name}.in.jsonl")
                write_prompts(prompts, name, n, base)
                plain, dflt, same, slept = [], [], True, []
                for r in range(rounds):  # interleaved: plain, default, plain, default, ...
                    tp, ip, _ = run(model, prompts, ["--strategy", "ar"] + extra, work, "ar", threads)
                    td, idd, ad = run(model, prompts, extra, work, "default", threads)
                    plain.append(tp)
                    dflt.append(td)
                    same = same and ip == idd
                    slept.append(ad.get("dormant_steps", 0) / max(1, ad.get("steps", 1)))
                ratios = [d / p for d, p in zip(dflt, plain)]
                fmt = lambda v: f"{statistics.median(v):.1f} [{min(v):.1f}-{max(v):.1f}]"
                print(f"| {case} | {name} ({n}) | {' '.join(extra)} | {fmt(plain)} | {fmt(dflt)} | "
                      f"{' '.join(f'{x:.2f}' for x in ratios)} | {'yes' if same else 'NO'} | "
                      f"{100 * statistics.median(slept):.0f}% |", flush=True)


if __name__ == "__main__":
    main()
