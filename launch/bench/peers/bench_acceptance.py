"""Body of launch/bench/peers/bench-acceptance.sh: mean accepted draft tokens per step at equal budgets, on the same greedy
traces, for our trie, suffix and prompt lookup (build/tests/la_replay_acceptance), arctic-inference's suffix tree
(its own SuffixDecodingCache and simulator.py's suffix_decode, built by launch/bench/peers/build-arctic.sh) and llama.cpp's
lookup decoding (its own llama-lookup binary run on the same prompt ids, built by launch/bench/peers/build-llamacpp.sh).

  python bench_acceptance.py LOOKAHEAD REPLAY MODEL SHARED OUT_DIR N MAX_NEW [THREADS]
  env LLAMA_BIN (dir with llama-lookup, llama-tokenize), LLAMA_GGUF (the model's F32 GGUF): unset = no llama rows

1. Traces: the first N prompts of HumanEval (raw code), MBPP, GSM8K, MT-Bench (first turn), CNN/DM (articles up to
   4000 characters) and Spec-Bench (first turn), chats through the model's template ("messages"), decoded greedily
   by the engine once (cached in OUT_DIR/traces.jsonl; greedy ids are the same for every strategy).
2. Replay, per set, budget (8, 16, 32) and mode: cold (a fresh strategy/cache per request) and warm (one strategy or
   cache over the set's requests in order: earlier outputs in the trie or the global tree). The budget is the same
   cap on draft nodes per step for everyone (ours: the controller's budget, Strategy::set_draft_budget, with
   --suffix-max-tokens / --pl-num-tokens raised to it; the trie keeps decoding length 64), arctic max_spec_tokens (tree speculation on, its defaults otherwise: max_spec_factor 1,
   min_token_prob 0.1, max_tree_depth 24 as vLLM's).
3. llama.cpp's lookup: llama-lookup itself, greedy, on the trace's prompt ids (the prompt detokenized, checked to
   tokenize back to the same ids by llama-tokenize), with --spec-draft-n-max = budget (its only draft-size option:
   the most tokens of its one linear draft per step; ours and arctic's budget caps the nodes of a tree). Its
   debug log (-v) names every sampled token and whether it matched the draft, so the generated ids are compared
   with the trace token by token, and the steps are cut at the trace's length exactly as the replay does (the
   tool itself runs past -n by up to one draft). Its first token comes from the prefill forward, which drafts
   nothing; the replay's first step may draft after the prompt. Cold: no cache file; warm: one dynamic cache file
   (-lcd: loaded at start, merged with the request's context n-grams and saved at exit by the tool) over the set's
   requests in order. Its static cache (-lcs) is a corpus file made offline (llama-lookup-create), not earlier
   requests, so it is not used.
Prints a markdown table and writes OUT_DIR/acceptance.json.
"""
import json, os, re, subprocess, sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
import prompt_sets  # noqa: E402

ALL_SETS = ("humaneval", "mbpp", "gsm8k", "mt-bench", "cnn-dm", "spec-bench")


def load_sets(shared, n):
    """{set: [engine input record without id]} (launch/prompt_sets.py); env SETS: a subset, e.g. "gsm8k,cnn-dm"."""
    only = prompt_sets.check([x for x in os.environ.get("SETS", "").split(",") if x]) or ALL_SETS
    out = {}
    for name in ALL_SETS:
        if name in only:
            out[name] = [{k: v for k, v in prompt_sets.engine_record(p).items() if k != "id"}
                         for p in prompt_sets.load(name, n, shared)]
    return out


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
           "--max-new-tokens", str(max_new), "--strategy", "prompt-lookup", "--quiet", "--batch", "1"]
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


BUDGETS = [int(x) for x in os.environ.get("BUDGETS", "8,16,32").split(",") if x]  # env BUDGETS: e.g. "16"
LLAMA_BIN = os.environ.get("LLAMA_BIN", "")
LLAMA_GGUF = os.environ.get("LLAMA_GGUF", "")
# One sampled token of llama-lookup's debug log (examples/lookup/lookup.cpp, LOG_DBG): drafted token accepted, or not.
LOOKUP_EVENT = re.compile(r"the sampled target token (?:matches the \d+th drafted token \((\d+), |\((\d+), )")


def llama_prompt_texts(lookahead, model, recs, work):
    """The prompts' texts for llama.cpp (our tokenizer's decode, special tokens as their text), each with whether
    llama-tokenize (parse special, BOS as the model says, as llama-lookup tokenizes) gives back the same ids."""
    inp = os.path.join(work, "prompt-ids.jsonl")
    with open(inp, "w") as f:
        for i, r in enumerate(recs):
            f.write(json.dumps({"id": str(i), "ids": r["prompt_ids"]}) + "\n")
    out = subprocess.run([lookahead, "tokenize", "--model", model, "--decode", "--input", inp], check=True,
                         capture_output=True, text=True).stdout
    texts = {j["id"]: j["text"] for j in map(json.loads, out.splitlines())}
    res = []
    for i, r in enumerate(recs):
        text = texts[str(i)]
        t = subprocess.run([os.path.join(LLAMA_BIN, "llama-tokenize"), "-m", LLAMA_GGUF, "-p", text, "--ids",
                            "--log-disable", "--no-escape"], capture_output=True, text=True, check=True)
        res.append((text, json.loads(t.stdout.strip().splitlines()[-1]) == list(r["prompt_ids"])))
    return res


def llama_lookup(texts, recs, budget, cold, work, threads):
    """llama-lookup on every trace's prompt: (mean accepted per step, requests whose generated ids equal the trace,
    requests whose prompt tokenized to the same ids)."""
    steps = acc = same = prompt_ok = 0
    lcd = os.path.join(work, f"lookup-{budget}.lcd")
    if os.path.exists(lcd):
        os.remove(lcd)
    for r, (text, ok) in zip(recs, texts):
        prompt_ok += ok
        trace = r["ids"]
        cmd = [os.path.join(LLAMA_BIN, "llama-lookup"), "-m", LLAMA_GGUF, "-p", text, "-n", str(len(trace)),
               "-c", "4096", "--temp", "0", "--seed", "0", "--no-escape", "--spec-draft-n-max", str(budget), "-v"]
        if threads:
            cmd += ["-t", str(threads), "-tb", str(threads)]
        if not cold:
            cmd += ["-lcd", lcd]
        p = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL)
        if p.returncode != 0:
            raise SystemExit(f"bench-acceptance: llama-lookup failed ({p.returncode}): {p.stderr[-2000:]}")
        ev = [(bool(a), int(a or b)) for a, b in LOOKUP_EVENT.findall(p.stderr)]
        if not ev:
            raise SystemExit(f"bench-acceptance: no token events in llama-lookup's log: {p.stderr[-2000:]}")
        ids = [t for _a, t in ev]
        same += ids[:len(trace)] == trace
        # ev[0] is the prefill's token; then each step is a run of accepted drafts closed by one non-matching token.
        remaining, run = len(trace) - 1, 0
        for accepted, _t in ev[1:]:
            if remaining <= 0:
                break
            if accepted:
                run += 1
                continue
            a = min(run, remaining - 1)  # the replay's cap: a step's tokens never pass the trace's end
            steps, acc, remaining, run = steps + 1, acc + a, remaining - (a + 1), 0
    return (acc / steps if steps else 0.0), same, prompt_ok


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
        texts = llama_prompt_texts(lookahead, model, recs, out_dir) if LLAMA_BIN and LLAMA_GGUF else None
        for mode in ("cold", "warm"):
            for b in BUDGETS:
                row = {"set": name, "mode": mode, "budget": b, "requests": len(recs),
                       "tokens": sum(len(r["ids"]) for r in recs)}
                for s in ("trie", "suffix", "prompt-lookup"):
                    row[s] = ours(replay, part, s, b, mode == "cold")
                try:
                    row["arctic"] = arctic(recs, b, mode == "cold")
                except ImportError as e:
                    row["arctic"] = None
                    row["arctic_error"] = str(e)
                if texts is not None:
                    row["llama"], row["llama_same_trace"], row["llama_prompt_ok"] = llama_lookup(
                        texts, recs, b, mode == "cold", out_dir, threads)
                else:
                    row["llama"] = None
                results.append(row)
                print(json.dumps(row), file=sys.stderr, flush=True)
    json.dump(results, open(os.path.join(out_dir, "acceptance.json"), "w"), indent=1)
    print("| set | mode | budget | trie | suffix | prompt lookup | arctic suffix | llama.cpp lookup | best ours / "
          "best peer | llama.cpp ids == trace |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        best = max(r["trie"], r["suffix"], r["prompt-lookup"])
        peers = [x for x in (r["arctic"], r["llama"]) if x is not None]
        peer = max(peers) if peers else None
        ratio = "-" if peer is None else ("inf" if peer == 0 else f"{best / peer:.2f}")
        fmt = lambda x: "-" if x is None else f"{x:.2f}"
        same = f"{r['llama_same_trace']}/{r['requests']}" if r["llama"] is not None else "-"
        print(f"| {r['set']} | {r['mode']} | {r['budget']} | {fmt(r['trie'])} | {fmt(r['suffix'])} | "
              f"{fmt(r['prompt-lookup'])} | {fmt(r['arctic'])} | {fmt(r['llama'])} | {ratio} | {same} |")
    bad = sorted({r["set"] for r in results if r["llama"] is not None and r["llama_prompt_ok"] != r["requests"]})
    if bad:
        print(f"WARNING: llama.cpp tokenizes some prompts of {', '.join(bad)} differently from the trace's ids")


if __name__ == "__main__":
    main()
