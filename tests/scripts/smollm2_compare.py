"""SmolLM2-135M-Instruct (the dequantized Q4_1 model launch/setup.sh converts) against Hugging Face transformers, fp32:

  * greedy ids of `lookahead generate` (plain decoding) equal transformers' greedy generate() on 8 prompts x 32 new
    tokens (5 chats through the model's template, 3 raw code prompts), the same prompt ids fed to both;
  * the engine's logits (`lookahead score`) at every generated position equal transformers' (max |diff| printed;
    must stay below 1e-3);
  * every strategy's ids equal plain decoding's;
  * `generate --chat` turns the prompt texts into exactly the ids of transformers' apply_chat_template.
Prints one line per check and exits non-zero on any failure.
"""
import json, os, subprocess, sys, tempfile

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

BIN, MODEL = sys.argv[1], sys.argv[2]
N_NEW = 32
CHATS = ["What is the capital of France?", "Write a short poem about the sea.",
         "Explain what a binary search does, in two sentences.", "List three fruits that are red.",
         "How many legs does a spider have? Answer briefly."]
CODE = ["def fibonacci(n):\n", "import numpy as np\n\ndef normalize(v):\n    \"\"\"Return v scaled to unit length.\"\"\"\n",
        "# Print the numbers from 1 to 10\nfor i in"]
# Small settings keep the suite short on a 2-core CPU (a step of T tokens costs about T/4 single-token forwards
# here); the strategies' defaults are covered on the shared models by the lossless suite.
STRATEGIES = [("jacobi", ["--jacobi-block", "6"]), ("lade", ["--window", "5", "--ngram", "4", "--guesses", "5"]),
              ("trie", ["--decoding-length", "16"]), ("prompt-lookup", [])]
failures = 0


def check(name, ok, detail=""):
    global failures
    print(("ok: " if ok else "FAIL: ") + name + (" " + detail if detail else ""), flush=True)
    failures += 0 if ok else 1


def lookahead(cmd, *args):
    # One thread each, here and in torch: with two threads a loaded 2-core machine spends most of a forward
    # spinning (measured: a one-token SmolLM2 forward 145 ms with 1 thread, 1.17 s with 2 while other jobs ran).
    args = (cmd, "--threads", "1", *args) if cmd == "generate" else (cmd, *args)
    r = subprocess.run([BIN, *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"FAIL: lookahead {' '.join(args)[:200]}: {r.stderr.strip()}")
    return r.stdout


torch.set_num_threads(1)
tok = AutoTokenizer.from_pretrained(MODEL)
model = AutoModelForCausalLM.from_pretrained(MODEL, dtype=torch.float32).eval()
eos = model.generation_config.eos_token_id
eos = eos if isinstance(eos, list) else [eos]


def chat_ids(text):
    ids = tok.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True, tokenize=True)
    return list(ids["input_ids"] if hasattr(ids, "keys") else ids)


prompts = [chat_ids(c) for c in CHATS] + [tok(c, add_special_tokens=False)["input_ids"] for c in CODE]
tmp = tempfile.mkdtemp(prefix="la-smollm2-")
inp = os.path.join(tmp, "in.jsonl")
with open(inp, "w") as f:
    for i, p in enumerate(prompts):
        f.write(json.dumps({"id": i, "prompt_ids": p}) + "\n")

# transformers: greedy ids and the logits of every generated position
want, want_logits = [], []
with torch.no_grad():
    for p in prompts:
        x = torch.tensor([p])
        o = model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=N_NEW, do_sample=False,
                           eos_token_id=eos, pad_token_id=eos[0])
        g = o[0, len(p):].tolist()
        want.append(g)
        want_logits.append(model(o).logits[0, len(p) - 1:len(p) - 1 + len(g)].float())


def run_strategy(strategy, extra):
    out = os.path.join(tmp, f"out-{strategy}-{len(extra)}.jsonl")
    lookahead("generate", "--model", MODEL, "--input", inp, "--output", out, "--max-new-tokens", str(N_NEW),
              "--strategy", strategy, "--quiet", *extra)
    return [r["ids"] for r in sorted(map(json.loads, open(out)), key=lambda r: r["id"])]  # --batch: finishing order


ar = run_strategy("ar", [])
same = sum(a == b for a, b in zip(ar, want))
check(f"greedy ids == transformers fp32 greedy ({len(prompts)} prompts x {N_NEW} tokens)", same == len(prompts),
      f"{same}/{len(prompts)} equal" + ("" if same == len(prompts) else f"\n  got  {ar}\n  want {want}"))

worst = 0.0
for p, g, ref in zip(prompts, want, want_logits):
    s = json.loads(lookahead("score", "--model", MODEL, "--ids", ",".join(map(str, p + g)), "--from", str(len(p) - 1)))
    got = torch.tensor(s["logits"]).view(len(g) + 1, -1)[:len(g)]
    worst = max(worst, (got - ref).abs().max().item())
check("logits == transformers (every generated position)", worst < 1e-3, f"max |diff| = {worst:.2e}")

for strategy, extra in STRATEGIES:
    got = run_strategy(strategy, extra)
    check(f"{strategy} {' '.join(extra)} ids == plain decoding", got == ar)

# the engine's own chat encoding (tokenizer.json + template) gives transformers' prompt ids
txt = os.path.join(tmp, "chat.jsonl")
with open(txt, "w") as f:
    for i, c in enumerate(CHATS):
        f.write(json.dumps({"id": i, "prompt": c}) + "\n")
    f.write(json.dumps({"id": "m", "messages": [{"role": "system", "content": "Be brief."},
                                                {"role": "user", "content": CHATS[0]}]}) + "\n")
out = os.path.join(tmp, "chat-out.jsonl")
lookahead("generate", "--model", MODEL, "--chat", "--input", txt, "--output", out, "--max-new-tokens", "1", "--quiet")
# in input order (records arrive in finishing order under --batch): the integer ids, then "m"
got = [r["prompt_ids"] for r in sorted(map(json.loads, open(out)), key=lambda r: (isinstance(r["id"], str), r["id"]))]
sysmsg = tok.apply_chat_template([{"role": "system", "content": "Be brief."}, {"role": "user", "content": CHATS[0]}],
                                 add_generation_prompt=True, tokenize=True)
want_ids = [chat_ids(c) for c in CHATS] + [list(sysmsg["input_ids"] if hasattr(sysmsg, "keys") else sysmsg)]
check("generate --chat prompt ids == transformers apply_chat_template", got == want_ids,
      "" if got == want_ids else f"\n  got  {got}\n  want {want_ids}")
sys.exit(1 if failures else 0)
