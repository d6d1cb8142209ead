"""Body of launch/bench/peers/bench-peers.sh: our engine against llama.cpp (built by launch/bench/peers/build-llamacpp.sh) on the same
weights, prompts and thread count, in one run, rounds interleaved.

  python bench_peers.py            (everything comes from the environment that bench-peers.sh sets)

Per prompt set and dtype it runs, in every round and in a rotated order:
  plain      llama-completion (greedy, --temp 0)           vs  lookahead --strategy ar
  lookup     llama-lookup (its default; --spec-draft-n-max 10) vs  --strategy prompt-lookup (--adaptive off; default),
             and our other lookup drafters with their defaults: --strategy trie, --strategy suffix
  lookahead  llama-lookahead (W15 N5 G15, built in)         vs  --strategy lade (--adaptive off; default; W15 N5 G15)
and before each round a streaming read (stream_read, same threads) and llama-bench tg. Prompts are rendered once
with transformers (the chat template for the chat sets) and tokenized there: our engine gets those ids
("prompt_ids"), llama.cpp gets the same text with special tokens parsed and no template, and llama-tokenize checks
that it makes the same ids of it. Reported per row: decode tokens/s (prefill excluded) min/median/max over rounds,
tokens per forward (S), ours / llama.cpp (medians), and whether the generated text equals the peer's plain decoding.
"""
import json, os, re, statistics, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
import prompt_sets  # noqa: E402

E = os.environ
ROOT = os.path.dirname(os.path.abspath(__file__))
BIN = E["LOOKAHEAD_BIN"]
LLAMA = E["LLAMA_BIN"]
MODEL = E["MODEL"]
SHARED = E["SHARED"]
THREADS = int(E.get("THREADS", "2"))
N = int(E.get("N", "2"))
ROUNDS = int(E.get("ROUNDS", "3"))
MAX_NEW = int(E.get("MAX_NEW", "128"))
STREAM = E["STREAM_BIN"]
DTYPES = [d for d in E.get("DTYPES", "f32,bf16").split(",") if d]
GGUF = {d: E[f"GGUF_{d.upper()}"] for d in DTYPES}  # llama.cpp's file per weight type: GGUF_F32, GGUF_BF16, ...
# OURS_GGUF=1: our engine serves the same GGUF file as llama.cpp (`--model FILE.gguf`, quantized weights kept
# quantized), e.g. Gemma-3-270M's Q4_K_M as downloaded; MODEL is then that file (its tokenizer via transformers).
# Otherwise our engine loads MODEL (a Hugging Face directory) at --dtype and llama.cpp a GGUF converted from it.
OURS_GGUF = E.get("OURS_GGUF", "0") == "1"
SETS = [s for s in E.get("SETS", "humaneval,mbpp,gsm8k,mt-bench").split(",") if s]
CTX = 2048


def load_sets():
    """{set: [(kind, text)]} of SETS (launch/prompt_sets.py)."""
    return {name: [(p["kind"], p["text"]) for p in prompt_sets.load(name, N, SHARED)]
            for name in prompt_sets.check(SETS)}


def render(tok, kind, text):
    """(text for llama.cpp, ids for us): the chat template rendered by transformers, or the raw text."""
    if kind == "chat":
        text = tok.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True,
                                       tokenize=False)
        ids = tok(text, add_special_tokens=False)["input_ids"]
        # a tokenizer that starts every text with BOS (Gemma) gets it here too, as llama.cpp adds it to the text
        bos = tok.bos_token_id
        if bos is not None and tok("x")["input_ids"][:1] == [bos] and ids[:1] != [bos]:
            ids = [bos] + ids
        return text, ids
    return text, tok(text)["input_ids"]  # the tokenizer's own special-token convention (BOS if it adds one)


def sh(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        raise SystemExit(f"bench-peers: error: failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr[-3000:]}")
    return r


def llama_ids(gguf, text, tmp):
    p = os.path.join(tmp, "tok.txt")
    open(p, "w").write(text)
    r = sh([f"{LLAMA}/llama-tokenize", "-m", gguf, "-f", p, "--ids", "--log-disable"])
    return json.loads(r.stdout.strip().splitlines()[-1])


ANSI = re.compile(r"\x1b\[[0-9;]*m")
PROMPT_MISMATCH = []

# --- llama.cpp runs -------------------------------------------------------------------------------------------
LLAMA_CONFIGS = {  # label -> (tool, extra flags)
    "llama-completion": ("llama-completion", ["-no-cnv", "--no-display-prompt"]),
    "llama-lookup": ("llama-lookup", []),
    "llama-lookup n10": ("llama-lookup", ["--spec-draft-n-max", "10"]),
    "llama-lookahead": ("llama-lookahead", []),
}


def run_llama(label, gguf, prompts, eos_texts, tmp):
    """Runs one llama.cpp config on every prompt; returns (tokens, decode seconds, forwards, texts)."""
    tool, extra = LLAMA_CONFIGS[label]
    tokens = secs = forwards = 0.0
    texts = []
    for i, (text, _ids) in enumerate(prompts):
        # -p, not -f: -f drops the prompt's last newline (llama.cpp's common/arg.cpp), which changes the ids
        cmd = [f"{LLAMA}/{tool}", "-m", gguf, "-p", text, "-n", str(MAX_NEW), "-t", str(THREADS), "-tb", str(THREADS),
               "-c", str(CTX), "--temp", "0", "--no-escape", "--seed", "0", *extra]
        r = sh(cmd, stdin=subprocess.DEVNULL)
        out, err = ANSI.sub("", r.stdout), r.stderr  # llama-lookahead colours accepted tokens
        # the prompt's length as the tool reports it (lookup/lookahead's perf summary counts draft tokens too)
        m = re.search(r"prompt eval time =.*/\s*(\d+) tokens" if tool == "llama-completion"
                      else r"encoded\s+(\d+) tokens", err)
        if not m or int(m.group(1)) != len(_ids):
            PROMPT_MISMATCH.append(f"{tool}: prompt {i} has {m.group(1) if m else '?'} tokens in llama.cpp, "
                                   f"{len(_ids)} in transformers")
        if tool == "llama-completion":
            m = re.search(r"\beval time =\s*([\d.]+) ms /\s*(\d+) runs", err)
            if not m:
                raise SystemExit(f"bench-peers: error: no eval time in the output of {' '.join(cmd)}\n{err[-2000:]}")
            secs += float(m.group(1)) / 1e3
            tokens += int(m.group(2))
            forwards += int(m.group(2))
            # stdout: generated text + (" [end of text]\n" at an eos) + "\n\n"
            gen = out[:-2] if out.endswith("\n\n") else out
            gen = gen[:-len(" [end of text]\n")] if gen.endswith(" [end of text]\n") else gen
        else:
            m = re.search(r"decoded\s+(\d+) tokens in\s+([\d.]+) seconds", err)
            a = re.search(r"n_accept\s*=\s*(\d+)", err)
            if not m or not a:
                raise SystemExit(f"bench-peers: error: no decode stats in the output of {' '.join(cmd)}\n{err[-2000:]}")
            n, acc = int(m.group(1)), int(a.group(1))
            tokens += n
            secs += float(m.group(2))
            forwards += n - acc  # each forward yields one token beyond the accepted drafts
            # stdout: "\n\n" + prompt pieces + generated pieces (eos as its text) + "\n\n" ... "\n\n"
            gen = out[2:] if out.startswith("\n\n") else out
            gen = gen[len(text):] if gen.startswith(text) else None
            if gen is not None and gen.endswith("\n\n\n\n"):
                gen = gen[:-4]
        if gen is not None:
            for e in eos_texts:  # cut at the eos the tool printed as text
                k = gen.find(e)
                if k >= 0:
                    gen = gen[:k]
        texts.append(gen)
    return tokens, secs, forwards, texts


# --- our runs -------------------------------------------------------------------------------------------------
OUR_CONFIGS = {
    "ours ar": ("ar", ["--adaptive", "off"]),
    "ours prompt-lookup fixed": ("prompt-lookup", ["--adaptive", "off"]),
    "ours prompt-lookup": ("prompt-lookup", []),
    "ours lade fixed": ("lade", ["--adaptive", "off"]),
    "ours lade": ("lade", []),
    "ours trie": ("trie", []),
    "ours suffix": ("suffix", []),
}


def run_ours(label, dtype, prompts, tmp):
    strat, extra = OUR_CONFIGS[label]
    inp = os.path.join(tmp, "ours.jsonl")
    with open(inp, "w") as f:
        for i, (_t, ids) in enumerate(prompts):
            f.write(json.dumps({"id": str(i), "prompt_ids": ids}) + "\n")
    out, st = os.path.join(tmp, "ours.out.jsonl"), os.path.join(tmp, "ours.stats.json")
    weights = ["--model", GGUF[dtype]] if OURS_GGUF else \
        ["--model", MODEL, "--dtype", "bf16" if dtype == "bf16" else "fp32"]
    cmd = [BIN, "generate", *weights, "--input", inp, "--output", out, "--overwrite", "--quiet",
           "--max-new-tokens", str(MAX_NEW), "--strategy", strat, "--stats-json", st, "--threads", str(THREADS),
           "--batch", "1", *extra]  # one at a time, as the peer
    sh(cmd)
    a = json.load(open(st))["aggregate"]
    recs = sorted((json.loads(l) for l in open(out)), key=lambda r: int(r["id"]))
    return (a["new_tokens"], a["seconds"] - a["prefill_s"], a["steps"],
            [(r["text"], r["finish_reason"]) for r in recs])


def same_text(ours, theirs):
    """ours: (text, finish_reason) or a llama text; theirs: the peer's plain-decoding text (None: unparsed)."""
    if theirs is None or ours is None:
        return False
    if isinstance(ours, tuple):
        text, fin = ours
        # a llama.cpp tool may run past MAX_NEW tokens (drafts accepted at the end): ours is then its prefix
        return theirs.startswith(text) if fin == "length" else theirs == text
    return ours.startswith(theirs) or theirs.startswith(ours)


def weight_elems(model_dir):
    n = 0
    for f in sorted(os.listdir(model_dir)):
        if f.endswith(".safetensors"):
            with open(os.path.join(model_dir, f), "rb") as fh:
                hl = int.from_bytes(fh.read(8), "little")
                hdr = json.loads(fh.read(hl))
            for k, v in hdr.items():
                if k != "__metadata__":
                    e = 1
                    for s in v["shape"]:
                        e *= s
                    n += e
    return n


def spread(xs):
    return (min(xs), statistics.median(xs), max(xs)) if xs else (float("nan"),) * 3


def fmt3(xs, f="{:.1f}"):
    lo, md, hi = spread(xs)
    return f"{f.format(md)} [{f.format(lo)}-{f.format(hi)}]"


def tokenizer():
    """transformers' tokenizer of MODEL: a directory, or a GGUF file (converted once by transformers and kept in
    $LOOKAHEAD_DEPS/bench-peers/tokenizer-<file>: a 262k vocabulary takes a while)."""
    from transformers import AutoTokenizer
    if not MODEL.endswith(".gguf"):
        return AutoTokenizer.from_pretrained(MODEL)
    cache = os.path.join(os.path.dirname(STREAM), "tokenizer-" + os.path.basename(MODEL)[:-5])
    stamp = f"{os.path.getsize(MODEL)} {os.path.getmtime(MODEL)}"
    if not (os.path.exists(os.path.join(cache, "STAMP")) and open(os.path.join(cache, "STAMP")).read() == stamp):
        tok = AutoTokenizer.from_pretrained(os.path.dirname(MODEL), gguf_file=os.path.basename(MODEL))
        if not tok.chat_template and "<start_of_turn>" in tok.get_vocab():
            # Gemma-3-270M's GGUF carries no tokenizer.chat_template (and so transformers has none): Gemma's own
            # turn format, as its template writes it; BOS is left to the tokenizer (render), as llama.cpp adds it.
            tok.chat_template = ("{% for m in messages %}<start_of_turn>{{ 'model' if m['role'] == 'assistant' "
                                 "else m['role'] }}\n{{ m['content'] | trim }}<end_of_turn>\n{% endfor %}"
                                 "{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}")
        tok.save_pretrained(cache)
        open(os.path.join(cache, "STAMP"), "w").write(stamp)
    return AutoTokenizer.from_pretrained(cache)


def eos_ids(tok):
    """The ids that end generation: generation_config.json's, or for a GGUF the tokenizer's eos and <end_of_turn>
    (the end-of-turn token both engines stop at for Gemma)."""
    gc = os.path.join(MODEL, "generation_config.json")
    if os.path.isfile(gc):
        eos = json.load(open(gc)).get("eos_token_id", [])
        return eos if isinstance(eos, list) else [eos]
    eot = tok.convert_tokens_to_ids("<end_of_turn>")
    return [tok.eos_token_id] + ([eot] if isinstance(eot, int) and eot != tok.unk_token_id else [])


def main():
    tok = tokenizer()
    eos = eos_ids(tok)
    eos_texts = [tok.convert_ids_to_tokens(e) for e in eos]
    tmp = tempfile.mkdtemp(prefix="la-bench-peers-")
    sets = {name: [render(tok, k, t) for k, t in items] for name, items in load_sets().items()}

    # The same prompt ids for both engines: llama.cpp's tokenization of the text we hand it.
    ids_ok = {}
    for name, prompts in sets.items():
        ok = sum(llama_ids(GGUF[DTYPES[0]], t, tmp) == ids for t, ids in prompts)
        ids_ok[name] = f"{ok}/{len(prompts)}"
        if ok != len(prompts):
            print(f"WARNING: {name}: llama.cpp tokenizes {len(prompts) - ok} prompt(s) differently from transformers",
                  flush=True)

    if OURS_GGUF:  # the file's bytes (tensor data plus a small header) are what a token streams
        wbytes = {d: os.path.getsize(GGUF[d]) for d in DTYPES}
    else:
        elems = weight_elems(MODEL)
        wbytes = {"f32": 4 * elems, "bf16": 2 * elems}
    configs = [("plain", "llama-completion"), ("plain", "ours ar"),
               ("lookup", "llama-lookup"), ("lookup", "llama-lookup n10"),
               ("lookup", "ours prompt-lookup fixed"), ("lookup", "ours prompt-lookup"),
               ("lookup", "ours trie"), ("lookup", "ours suffix"),
               ("lookahead", "llama-lookahead"), ("lookahead", "ours lade fixed"), ("lookahead", "ours lade")]
    res = {}   # (dtype, set, label) -> {"tps": [...], "S": [...], "texts": last texts}
    bw, lbench = [], {d: [] for d in DTYPES}
    t_start = time.time()

    def report():  # the tables so far: printed after every round, so a cut run still leaves numbers
        print(f"\nmodel {MODEL}{' (both engines serve the GGUF file)' if OURS_GGUF else ''}; {THREADS} threads both engines; {N} prompt(s) per set, {MAX_NEW} new tokens, greedy; "
              f"{len(bw)} of {ROUNDS} interleaved rounds: median [min-max]; prompt ids llama.cpp == transformers: "
              + ", ".join(f"{k} {v}" for k, v in ids_ok.items()))
        if PROMPT_MISMATCH:
            print("WARNING: prompt token counts differ: " + "; ".join(sorted(set(PROMPT_MISMATCH))[:5]))
        print("\n| dtype | set | group | engine / config | tok/s | S | ours / llama.cpp | text == llama.cpp plain "
              "| text == own plain |")
        print("|---|---|---|---|---|---|---|---|---|")
        for d in DTYPES:
            for name in sets:
                if any(len(res.get((d, name, l), {}).get("tps", [])) < len(bw) for _g, l in configs):
                    continue  # this round has not reached it yet
                base = res[(d, name, "llama-completion")]["texts"]
                for grp, label in configs:
                    e = res[(d, name, label)]
                    peer = {"plain": "llama-completion", "lookup": "llama-lookup", "lookahead": "llama-lookahead"}[grp]
                    ratio = ""
                    if label.startswith("ours"):
                        med = statistics.median(e["tps"])
                        ratio = f"{med / statistics.median(res[(d, name, peer)]['tps']):.2f}"
                        if grp == "lookup":
                            ratio += f" (n10: {med / statistics.median(res[(d, name, 'llama-lookup n10')]['tps']):.2f})"
                    same = sum(same_text(o, b) for o, b in zip(e["texts"], base))
                    # lossless check: each engine's drafting against its own plain decoding
                    own_base = res[(d, name, "ours ar" if label.startswith("ours") else "llama-completion")]["texts"]
                    own = sum(same_text(o, b[0] if isinstance(b, tuple) else b) for o, b in zip(e["texts"], own_base))
                    print(f"| {d.upper()} | {name} | {grp} | {label} | {fmt3(e['tps'])} | {statistics.median(e['S']):.2f}"
                          f" | {ratio} | {same}/{len(base)} | {own}/{len(base)} |")
        print("\nMemory floor (every weight byte streamed once per token):")
        print(f"stream read, {THREADS} threads, 1 GiB: {fmt3(bw)} GB/s")
        print("\n| dtype | weight bytes | floor ms/token | floor tok/s | llama-bench tg | llama.cpp plain / floor "
              "| ours plain / floor |")
        print("|---|---|---|---|---|---|---|")
        for d in DTYPES:
            fl = [b * 1e9 / wbytes[d] for b in bw]  # floor tok/s per round

            def frac(label):
                # per round: the engine's plain tokens/s over every set (harmonic: tokens / seconds) / that round's floor
                per = []
                for rr in range(len(bw)):
                    t = [res[(d, s, label)]["tps"][rr] for s in sets if len(res.get((d, s, label), {}).get("tps", [])) > rr]
                    if not t:
                        continue
                    per.append(len(t) / sum(1 / x for x in t) / fl[rr])
                return fmt3(per, "{:.2f}")
            print(f"| {d.upper()} | {wbytes[d] / 1e6:.0f} MB | {fmt3([1e3 / f for f in fl], '{:.1f}')} | {fmt3(fl)} "
                  f"| {fmt3(lbench[d])} | {frac('llama-completion')} | {frac('ours ar')} |")
        print("\ntok/s: generated tokens / decode seconds (prefill excluded), summed over the set's prompts; S: tokens "
              "per forward (llama.cpp: generated / (generated - accepted drafts)); ours / llama.cpp: medians, against "
              "the peer row of the group (lookup: llama-lookup default, and n10); text: prompts whose generated text "
              "equals llama-completion's on the same weights (a longer run counts if ours is its prefix).")

        json.dump({"model": MODEL, "threads": THREADS, "n": N, "rounds": ROUNDS, "stream_gbps": bw, "llama_bench": lbench,
                   "weight_bytes": wbytes, "ids_ok": ids_ok,
                   "rows": [{"dtype": d, "set": s, "label": l, "group": v["grp"], "tps": v["tps"], "S": v["S"],
                             "texts": v["texts"]} for (d, s, l), v in res.items()]},
                  open(os.path.join(tmp, "results.json"), "w"), indent=1)
        print(f"raw results: {tmp}/results.json")

    for rnd in range(ROUNDS):
        r = json.loads(sh([STREAM, str(THREADS), "1024", "5"]).stdout)
        bw.append(r["best_gbps"])
        for d in DTYPES:
            j = json.loads(sh([f"{LLAMA}/llama-bench", "-m", GGUF[d], "-t", str(THREADS), "-p", "0", "-n",
                               str(MAX_NEW), "-r", "1", "-o", "json"]).stdout)
            lbench[d].append(j[0]["avg_ts"])
        for d in DTYPES:
            for name, prompts in sets.items():
                k = rnd % len(configs)  # rotate the order each round: no config always runs first or last
                for grp, label in configs[k:] + configs[:k]:
                    if label.startswith("llama"):
                        tk, s, fw, texts = run_llama(label, GGUF[d], prompts, eos_texts, tmp)
                    else:
                        tk, s, fw, texts = run_ours(label, d, prompts, tmp)
                    e = res.setdefault((d, name, label), {"tps": [], "S": [], "texts": None, "grp": grp})
                    e["tps"].append(tk / s)
                    e["S"].append(tk / max(1, fw))
                    e["texts"] = texts
                report()  # after every set, so a run cut short still leaves its numbers
        print(f"\nround {rnd + 1}/{ROUNDS} done ({time.time() - t_start:.0f} s; stream read {bw[-1]:.1f} GB/s)",
              flush=True)

    chart = E.get("CHART")
    if chart:
        make_chart(chart, res, sets, configs)


def make_chart(path, res, sets, configs):  # launch/plot.py draws it (pinned matplotlib installed on first use)
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    import plot
    plot.peers(path, res, list(sets), [l for _g, l in configs], DTYPES, THREADS)


if __name__ == "__main__":
    main()
