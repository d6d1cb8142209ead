"""Body of launch/bench/bench-real.sh: SmolLM2-135M-Instruct (fp32, CPU) on real tasks, every strategy, and Hugging Face
transformers on the same prompt ids and weights, in one run.

  python bench_real.py MODEL_DIR SHARED N_PER_SET MAX_NEW [extra lookahead flags...]

Prompt sets (first N of each): MT-Bench first turns (chat), HumanEval prompts (raw code, no template), GSM8K
questions (chat), CNN/DailyMail articles (chat, "Summarize:" + the article; only articles up to 4000 characters, to
bound the prefill). Prompts are tokenized once here with transformers (apply_chat_template for the chats) and fed to
both engines as the same ids ("prompt_ids"). For transformers: greedy generate() and prompt lookup
(prompt_lookup_num_tokens=10), timed per prompt (prefill included: compare with the engine's e2e column),
and whether their ids equal the engine's plain decoding.
"""
import json, os, sys, tempfile, time

sys.path.insert(0, os.path.dirname(__file__))
from bench_lib import run, prompt_sets  # noqa: E402

def load_sets(shared, n):
    """{set: [(kind, text)]} of the sets above (launch/prompt_sets.py)."""
    return {name: [(p["kind"], p["text"]) for p in prompt_sets.load(name, n, shared)]
            for name in ("mt-bench", "humaneval", "gsm8k", "cnn-dm")}


def tokenize(tok, kind, text):
    if kind == "chat":
        ids = tok.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True, tokenize=True)
        return list(ids["input_ids"] if hasattr(ids, "keys") else ids)
    return tok(text, add_special_tokens=False)["input_ids"]


def hf_run(model, prompts, max_new, eos, **kw):
    import torch
    ids_out, new_tok, secs = [], 0, 0.0
    with torch.no_grad():
        for p in prompts:
            x = torch.tensor([p])
            t0 = time.perf_counter()
            o = model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=max_new, do_sample=False,
                               eos_token_id=eos, pad_token_id=eos[0], **kw)
            secs += time.perf_counter() - t0
            g = o[0, len(p):].tolist()
            ids_out.append(g)
            new_tok += len(g)
    return ids_out, new_tok / secs


def plain_share(stats):
    """Share of an adaptive run's steps that were plain ("-" for fixed runs), from --stats-json."""
    ad = stats.get("adaptive")
    return f"{100 * ad['plain_fraction']:.1f}" if ad else "-"


def main():
    model_dir, shared, n, max_new = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    extra = sys.argv[5:]
    import torch
    threads = int(os.environ.get("THREADS", "0"))
    if threads > 0:  # the same CPU threads for both engines
        torch.set_num_threads(threads)
        extra = ["--threads", str(threads)] + extra
    from transformers import AutoModelForCausalLM, AutoTokenizer
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    eos = model.generation_config.eos_token_id
    eos = eos if isinstance(eos, list) else [eos]
    tmp = tempfile.mkdtemp(prefix="la-bench-real-")
    OFF, ON = ["--adaptive", "off"], ["--adaptive", "on"]
    # Fixed rows (--adaptive off: the parameters as given) and adaptive rows ("+a": those parameters are the upper
    # bounds the controller picks below, step by step).
    fixed = [("jacobi", "jacobi", []), ("jacobi-b4", "jacobi", ["--jacobi-block", "4"]),
             ("lade", "lade", []), ("lade-W5N4G5", "lade", ["--window", "5", "--ngram", "4", "--guesses", "5"]),
             ("trie", "trie", []), ("trie-d16", "trie", ["--decoding-length", "16", "--branch-length", "8"]),
             ("prompt-lookup", "prompt-lookup", []),
             ("pl-n3", "prompt-lookup", ["--pl-max-ngram", "3", "--pl-num-tokens", "3"])]
    strategies = [("ar", "ar", OFF)] + [(l, st, o + OFF) for l, st, o in fixed]
    strategies += [(l + "+a", st, o + ON) for l, st, o in fixed if l in ("jacobi", "lade", "trie", "prompt-lookup")]
    # STRATEGIES="trie,trie+a,...": only these rows (plain decoding always runs: every ratio is to it); SETS likewise.
    only = set(filter(None, os.environ.get("STRATEGIES", "").split(",")))
    if only:
        strategies = [x for x in strategies if x[0] == "ar" or x[0] in only]
    only_sets = set(filter(None, os.environ.get("SETS", "").split(",")))
    print(f"model {model_dir} (fp32, cpu, torch threads {torch.get_num_threads()}); {n} prompts per set, "
          f"{max_new} new tokens, greedy")
    print(f"{'set':10s} {'engine':13s} {'strategy':14s} {'S':>5s} {'acc/step':>8s} {'tok/s':>7s} {'x AR':>5s} "
          f"{'e2e tok/s':>9s} {'tok/step':>8s} {'fwd ms':>7s} {'plain%':>6s} ids==ours-ar")
    for name, items in load_sets(shared, n).items():
        if only_sets and name not in only_sets:
            continue
        prompts = [tokenize(tok, k, t) for k, t in items]
        path = os.path.join(tmp, f"{name}.jsonl")
        with open(path, "w") as f:
            for i, p in enumerate(prompts):
                f.write(json.dumps({"id": f"{name}-{i}", "prompt_ids": p}) + "\n")
        plen = sum(map(len, prompts)) / max(1, len(prompts))
        base = None
        for label, strat, sx in strategies:
            st, ids = run(model_dir, path, strat, max_new, tmp, list(sx) + extra, label=label)
            a = st["aggregate"]
            tps = a["new_tokens"] / (a["seconds"] - a["prefill_s"])
            e2e = a["new_tokens"] / a["seconds"]
            if base is None:
                base = (tps, ids, e2e)
            steps = max(1, a["steps"])
            print(f"{name:10s} {'lookahead':13s} {label:14s} {a['compression']:5.2f} {a['mean_accepted']:8.2f} "
                  f"{tps:7.1f} {tps / base[0]:5.2f} {e2e:9.1f} {a['step_tokens_per_step']:8.1f} "
                  f"{1e3 * a['forward_s'] / steps:7.2f} {plain_share(st):>6s} {'yes' if ids == base[1] else 'NO'}", flush=True)
        for label, kw in (("greedy", {}), ("prompt-lookup", {"prompt_lookup_num_tokens": 10})):
            hids, htps = hf_run(model, prompts, max_new, eos, **kw)
            same = sum(a == b for a, b in zip(hids, base[1]))
            print(f"{name:10s} {'transformers':13s} {label:14s} {'':5s} {'':8s} {'':7s} {htps / base[2]:5.2f} "
                  f"{htps:9.1f} {'':8s} {'':7s} {'':6s} {'yes' if same == len(prompts) else f'{same}/{len(prompts)}'}", flush=True)
        print(f"{name:10s} ({len(prompts)} prompts, mean prompt length {plen:.0f} tokens)", flush=True)
    print("S = new tokens / forward steps; acc/step = accepted draft tokens per step; tok/s = decoding only (prefill "
          "excluded); e2e tok/s = new tokens / whole request time (prefill included; transformers: generate() per "
          "prompt); x AR = over the engine's plain decoding in this run (transformers rows: e2e over e2e); tok/step = tokens per forward; "
          "plain% = adaptive steps that fell back to plain decoding; +a = --adaptive on (the row's parameters are upper bounds); ids==ours-ar: generated ids equal the engine's plain "
          "decoding (transformers: prompts that match)")


if __name__ == "__main__":
    main()
