"""Body of launch/bench-acceptance.sh: mean accepted draft tokens per step at equal budgets, on the same greedy
traces, for our trie, suffix and prompt lookup (build/tests/la_replay_acceptance) and arctic-inference's suffix tree
(its own SuffixDecodingCache and simulator.py's suffix_decode, built by launch/build-arctic.sh).

  python bench_acceptance.py LOOKAHEAD REPLAY MODEL SHARED OUT_DIR N MAX_NEW [THREADS]

1. Traces: the first N prompts of HumanEval (raw code), MBPP, GSM8K, MT-Bench (first turn), CNN/DM (articles up to
   4000 characters) and Spec-Bench (first turn), chats through the model's template ("messages"), decoded greedily
   by the engine once (cached in OUT_DIR/traces.jsonl; greedy ids are the same for every strategy).
2. Replay, per set, budget (8, 16, 32) and mode: cold (a fresh strategy/cache per request) and warm (one strategy or
   cache over the set's requests in order: earlier outputs in the trie or the global tree). The budget is the same
   cap on draft nodes per step for everyone (ours: the controller's budget, Strategy::set_draft_budget, with
   --suffix-max-tokens / --pl-num-tokens raised to it; the trie keeps decoding length 64), arctic max_spec_tokens (tree speculation on, its defaults otherwise: max_spec_factor 1,
   min_token_prob 0.1, max_tree_depth 24 as vLLM's).
Prints a markdown table and writes OUT_DIR/acceptance.json.
"""
import gzip, json, os, subprocess, sys

CNN_MAX_CHARS = 4000


def load_sets(shared, n):
    d = os.path.join(shared, "datasets")
    chat = lambda t: {"messages": [{"role": "user", "content": t}]}
    sets = {}
    sets["humaneval"] = [{"prompt": json.loads(l)["prompt"]} for l in gzip.open(os.path.join(d, "humaneval/HumanEval.jsonl.gz"), "rt")][:n]
    mb = []
    for l in open(os.path.join(d, "mbpp/mbpp.jsonl")):
        r = json.loads(l)
        tests = "\n".join(r.get("test_list", [])[:1])
        mb.append(chat(r["text"] + ("\nYour code should pass this test:\n" + tests if tests else "")))
    sets["mbpp"] = mb[:n]
    sets["gsm8k"] = [chat(json.loads(l)["question"]) for l in open(os.path.join(d, "gsm8k/test.jsonl"))][:n]
    sets["mt-bench"] = [chat(json.loads(l)["turns"][0]) for l in open(os.path.join(d, "mt_bench/question.jsonl"))][:n]
    cnn = []
    for l in open(os.path.join(d, "cnn_dailymail/cnn_dailymail_0shot.jsonl")):
        a = json.loads(l)["article"]
        a = a.removeprefix("###\nArticle: ").split("\n\nSummarize the above article")[0].strip()
        if len(a) <= CNN_MAX_CHARS:
            cnn.append(chat("Summarize:\n" + a))
        if len(cnn) == n:
            break
    sets["cnn-dm"] = cnn
    # Spec-Bench's own categories (its first 80 questions are MT-Bench's): translation, summarization, qa,
    # math_reasoning, rag (80 each, in that order), taken round-robin.
    sb = [json.loads(l)["turns"][0] for l in open(os.path.join(d, "spec_bench/question.jsonl"))]
    sets["spec-bench"] = [chat(sb[80 + 80 * (i % 5) + i // 5]) for i in range(n)]
    return sets


def traces(lookahead, model, sets, out_dir, max_new, threads):
    """Greedy traces of every prompt, kept in OUT_DIR/traces.jsonl; only prompts without a trace are decoded."""
    path = os.path.join(out_dir, "traces.jsonl")
    have = {json.loads(l)["id"] for l in open(path)} if os.path.exists(path) else set()
    inp = os.path.join(out_dir, "prompts.jsonl")
    todo = 0
    with open(inp, "w") as f:
        for name, recs in sets.items():
            for i, r in enumerate(recs):
                if f"{name}-{i}" not in have:
                    f.write(json.dumps({"id": f"{name}-{i}", **r}) + "\n")
                    todo += 1
    if todo == 0:
        return path
    new = os.path.join(out_dir, "traces.new.jsonl")
    cmd = [lookahead, "generate", "--model", model, "--input", inp, "--output", new, "--overwrite",
           "--max-new-tokens", str(max_new), "--strategy", "prompt-lookup", "--quiet"]
    if threads:
        cmd += ["--threads", str(threads)]
    subprocess.run(cmd, check=True)
    with open(path, "a") as f:
        f.write(open(new).read())
    return path


def ours(replay, trace_file, strategy, budget, cold):
    # The budget caps the plan (Strategy::set_draft_budget); the flags only lift the fixed caps below it. The trie
    # keeps its default decoding length 64 (its capacity, 32 x decoding length, would shrink with a smaller one).
    flag = {"trie": [], "suffix": ["--suffix-max-tokens", str(budget)],
            "prompt-lookup": ["--pl-num-tokens", str(budget)]}[strategy]
    cmd = [replay, "--input", trace_file, "--strategy", strategy, "--budget", str(budget)] + flag
    if cold:
        cmd.append("--cold")
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)["mean_accepted"]


def arctic(recs, budget, cold):
    import numpy as np
    from arctic_inference.suffix_decoding import SuffixDecodingCache
    from arctic_inference.suffix_decoding.simulator import suffix_decode
    steps = acc = 0
    cache = None
    for i, r in enumerate(recs):
        if cache is None or cold:
            cache = SuffixDecodingCache(max_tree_depth=24)
        res = suffix_decode(cache, i, np.array(r["prompt_ids"], dtype=np.int32), np.array(r["ids"], dtype=np.int32),
                            max_spec_tokens=budget, max_spec_factor=1.0, min_token_prob=0.1, use_tree_spec=True,
                            use_cached_prompt=True)
        steps += len(res)
        acc += sum(x["num_accept_toks"] for x in res)
    return acc / steps if steps else 0.0


def main():
    lookahead, replay, model, shared, out_dir, n, max_new = sys.argv[1:8]
    threads = int(sys.argv[8]) if len(sys.argv) > 8 else 0
    n, max_new = int(n), int(max_new)
    os.makedirs(out_dir, exist_ok=True)
    sets = load_sets(shared, n)
    tf = traces(lookahead, model, sets, out_dir, max_new, threads)
    by_set = {}
    for l in open(tf):
        r = json.loads(l)
        by_set.setdefault(r["id"].rsplit("-", 1)[0], []).append(r)
    results = []
    for name in sets:
        recs = by_set.get(name, [])
        part = os.path.join(out_dir, f"traces-{name}.jsonl")
        with open(part, "w") as f:
            for r in recs:
                f.write(json.dumps({"prompt_ids": r["prompt_ids"], "ids": r["ids"]}) + "\n")
        for mode in ("cold", "warm"):
            for b in (8, 16, 32):
                row = {"set": name, "mode": mode, "budget": b, "requests": len(recs),
                       "tokens": sum(len(r["ids"]) for r in recs)}
                for s in ("trie", "suffix", "prompt-lookup"):
                    row[s] = ours(replay, part, s, b, mode == "cold")
                try:
                    row["arctic"] = arctic(recs, b, mode == "cold")
                except ImportError as e:
                    row["arctic"] = None
                    row["arctic_error"] = str(e)
                results.append(row)
                print(json.dumps(row), file=sys.stderr, flush=True)
    json.dump(results, open(os.path.join(out_dir, "acceptance.json"), "w"), indent=1)
    print("| set | mode | budget | trie | suffix | prompt lookup | arctic suffix | best ours / arctic |")
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        best = max(r["trie"], r["suffix"], r["prompt-lookup"])
        a = r["arctic"]
        ratio = f"{best / a:.2f}" if a else "-"
        fmt = lambda x: "-" if x is None else f"{x:.2f}"
        print(f"| {r['set']} | {r['mode']} | {r['budget']} | {fmt(r['trie'])} | {fmt(r['suffix'])} | "
              f"{fmt(r['prompt-lookup'])} | {fmt(a)} | {ratio} |")


if __name__ == "__main__":
    main()
