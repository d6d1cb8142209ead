"""The one loader of the benchmark prompt sets (the shared folder's datasets/): one name per set, one record shape,
used by every benchmark (named prompt_sets, not datasets: that is Hugging Face's package) (launch/bench/, launch/bench/peers/).

  load(name, n, shared, base=False, max_chars=None) -> [{"id": str, "kind": "chat" | "raw", "text": str}, ...]
  engine_record(p)  -> the `lookahead generate --input` record of a prompt: {"id", "messages"} or {"id", "prompt"}

Sets (first n prompts, in the file's order):
  tinystories  story openings (raw)
  dolly        Dolly instructions in their Alpaca-style frame (raw)
  gsm8k        grade-school math questions (chat; base: "Question: ...\\nAnswer:", questions up to 200 characters)
  humaneval    Python function stubs (raw code, no template; max_chars: only stubs up to that length)
  mbpp         a task and its first test (chat: "...\\nYour code should pass this test:\\n<test>"; base: the two
               in a docstring, the model writes the function)
  mt-bench     MT-Bench first turns (chat)
  cnn-dm       CNN/DailyMail articles (chat: "Summarize:\\n" + the article, only articles up to max_chars, 4000 by
               default, to bound the prefill; base: Spec-Bench's 0-shot prompt with the article cut to max_chars,
               600 by default)
  spec-bench   Spec-Bench's own categories (its first 80 questions are MT-Bench's): translation, summarization, qa,
               math_reasoning, rag (80 each, in that order), taken round-robin (chat)

base=True is for the shared base models (stories260K, llama2xs: no chat template, 256/512 positions): every prompt
is raw completion text, and the long sets are shortened as said above.
"""
import gzip, json, os

SETS = ("tinystories", "dolly", "gsm8k", "humaneval", "mbpp", "mt-bench", "cnn-dm", "spec-bench")


def _jsonl(shared, rel):
    path = os.path.join(shared, "datasets", rel)
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return [json.loads(l) for l in f if l.strip()]


def _take(gen, n):
    out = []
    for p in gen:
        if len(out) == n:
            break
        out.append(p)
    return out


def _prompts(name, shared, base, max_chars):
    chat = "raw" if base else "chat"
    if name == "tinystories":
        for r in _jsonl(shared, "tinystories/prompts.jsonl"):
            yield {"id": r["id"], "kind": "raw", "text": r["prompt"]}
    elif name == "dolly":
        for i, r in enumerate(_jsonl(shared, "dolly_subset/dolly.jsonl")):
            yield {"id": f"dolly-{i}", "kind": "raw", "text": r["prompt"]}
    elif name == "gsm8k":
        for i, r in enumerate(_jsonl(shared, "gsm8k/test.jsonl")):
            q = r["question"]
            if not base:
                yield {"id": f"gsm8k-{i}", "kind": "chat", "text": q}
            elif len(q) <= 200:
                yield {"id": f"gsm8k-{i}", "kind": "raw", "text": "Question: " + q + "\nAnswer:"}
    elif name == "humaneval":
        for r in _jsonl(shared, "humaneval/HumanEval.jsonl.gz"):
            if max_chars is None or len(r["prompt"]) <= max_chars:
                yield {"id": r["task_id"], "kind": "raw", "text": r["prompt"]}
    elif name == "mbpp":
        for r in _jsonl(shared, "mbpp/mbpp.jsonl"):
            test = "\n".join(r.get("test_list", [])[:1])
            if base:
                text = f'"""\n{r["text"]}\n{test}\n"""\n'
            else:
                text = r["text"] + ("\nYour code should pass this test:\n" + test if test else "")
            yield {"id": f"mbpp-{r['task_id']}", "kind": chat, "text": text}
    elif name == "mt-bench":
        for r in _jsonl(shared, "mt_bench/question.jsonl"):
            yield {"id": f"mt-{r['question_id']}", "kind": chat, "text": r["turns"][0]}
    elif name == "cnn-dm":
        for i, r in enumerate(_jsonl(shared, "cnn_dailymail/cnn_dailymail_0shot.jsonl")):
            a = r["article"]
            if base:  # Spec-Bench's 0-shot prompt, the article cut to fit a small context
                limit = 600 if max_chars is None else max_chars
                head, sep, ask = a.rpartition("\n\nSummarize")
                body = head if sep else a
                if len(body) > limit:
                    body = body[:limit].rsplit(" ", 1)[0]
                yield {"id": f"cnn-{i}", "kind": "raw", "text": body + (sep + ask if sep else "") + "\n"}
            else:
                a = a.removeprefix("###\nArticle: ").split("\n\nSummarize the above article")[0].strip()
                if len(a) <= (4000 if max_chars is None else max_chars):
                    yield {"id": f"cnn-{i}", "kind": "chat", "text": "Summarize:\n" + a}
    elif name == "spec-bench":
        qs = [r["turns"][0] for r in _jsonl(shared, "spec_bench/question.jsonl")]
        for i in range(len(qs) - 80):
            j = 80 + 80 * (i % 5) + i // 5
            yield {"id": f"spec-{j}", "kind": chat, "text": qs[j]}
    else:
        raise SystemExit(f"unknown prompt set '{name}' (known: {', '.join(SETS)})")


def load(name, n, shared, base=False, max_chars=None):
    """The first n prompts of set `name` (fewer when the set has fewer): dicts with id, kind and text."""
    if name not in SETS:
        raise SystemExit(f"unknown prompt set '{name}' (known: {', '.join(SETS)})")
    return _take(_prompts(name, shared, base, max_chars), n)


def check(names):
    """Exits with one clear line when a name is not a set (for the SETS environment variables)."""
    unknown = [s for s in names if s not in SETS]
    if unknown:
        raise SystemExit(f"unknown prompt set(s) {', '.join(unknown)} (known: {', '.join(SETS)})")
    return list(names)


def engine_record(p):
    """The `lookahead generate --input` record of a prompt: chats go through the model's template (--chat)."""
    if p["kind"] == "chat":
        return {"id": p["id"], "messages": [{"role": "user", "content": p["text"]}]}
    return {"id": p["id"], "prompt": p["text"]}
