"""`generate --chat-thinking` and `--chat-date` against transformers' apply_chat_template kwargs.

SmolLM2's tokenizer with the chat template swapped for Qwen3's (enable_thinking) or Llama-3.1's / 3.2's (date_string):
the prompt ids `lookahead generate --chat` writes must equal transformers' apply_chat_template(messages,
add_generation_prompt=True, tokenize=True, **kwargs) for the same kwargs; a flag the template does not read, or a
bad value, is one clear error.

  python chat_options_compare.py LOOKAHEAD_BIN SMOLLM2_DIR
"""
import json, os, shutil, subprocess, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from chat_template_fixtures import LLAMA31, LLAMA32, QWEN3  # the released templates' text

from transformers import AutoTokenizer

BIN, SMOL = sys.argv[1], sys.argv[2]
tmp = tempfile.mkdtemp(prefix="chat-options-")
failures = 0


def check(name, ok, detail=""):
    global failures
    print(("ok: " if ok else "FAIL: ") + name + (" " + detail if detail else ""), flush=True)
    failures += not ok


def tokenizer_dir(name, template):
    d = os.path.join(tmp, name)
    os.makedirs(d)
    shutil.copy(os.path.join(SMOL, "tokenizer.json"), d)
    cfg = json.load(open(os.path.join(SMOL, "tokenizer_config.json")))
    cfg["chat_template"] = template
    json.dump(cfg, open(os.path.join(d, "tokenizer_config.json"), "w"))
    return d


CHATS = [[{"role": "user", "content": "Hello!"}],
         [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 2 + 2?"}]]
inp = os.path.join(tmp, "in.jsonl")
with open(inp, "w") as f:
    for i, m in enumerate(CHATS):
        f.write(json.dumps({"id": i, "messages": m}) + "\n")


def run(tok_dir, flags):
    out = os.path.join(tmp, "out.jsonl")
    r = subprocess.run([BIN, "generate", "--model", SMOL, "--tokenizer", tok_dir, "--input", inp, "--output", out,
                        "--max-new-tokens", "1", "--quiet", "--threads", "1", "--overwrite"] + flags, capture_output=True, text=True)
    if r.returncode != 0:
        return None, r.stderr.strip()
    return [json.loads(l)["prompt_ids"] for l in open(out)], ""


CASES = [("qwen3", QWEN3, {}, []),
         ("qwen3", QWEN3, {"enable_thinking": False}, ["--chat-thinking", "off"]),
         ("qwen3", QWEN3, {"enable_thinking": True}, ["--chat-thinking", "on"]),
         ("llama3.1", LLAMA31, {}, []),
         ("llama3.1", LLAMA31, {"date_string": "05 Mar 2025"}, ["--chat-date", "05 Mar 2025"]),
         ("llama3.2", LLAMA32, {"date_string": "01 Jan 2026"}, ["--chat-date", "01 Jan 2026"])]
dirs = {}
for name, template, kwargs, flags in CASES:
    if name not in dirs:
        dirs[name] = tokenizer_dir(name, template)
    tok = AutoTokenizer.from_pretrained(dirs[name])
    want = []
    for m in CHATS:
        ids = tok.apply_chat_template(m, add_generation_prompt=True, tokenize=True, **kwargs)
        want.append(list(ids["input_ids"] if hasattr(ids, "keys") else ids))
    got, err = run(dirs[name], flags)
    check(f"{name} {' '.join(flags) or '(no flag)'} prompt ids == apply_chat_template(**{kwargs})", got == want,
          err if got is None else "" if got == want else f"\n  got  {got}\n  want {want}")


def expect_error(name, tok_dir, flags, needle):
    got, err = run(tok_dir, flags)
    check(f"error: {name}", got is None and needle in err, f"(stderr: {err!r})")


expect_error("--chat-thinking on a Llama-3.1 template", dirs["llama3.1"], ["--chat-thinking", "off"],
             "has no enable_thinking switch")
expect_error("--chat-date on a Qwen3 template", dirs["qwen3"], ["--chat-date", "01 Jan 2026"], "has no date line")
expect_error("--chat-thinking maybe", dirs["qwen3"], ["--chat-thinking", "maybe"], "invalid --chat-thinking 'maybe'")
r = subprocess.run([BIN, "generate", "--model", "random:tiny-mha", "--prompt", "hi", "--chat-thinking", "off", "--quiet"],
                   capture_output=True, text=True)
check("error: --chat-thinking without --chat", r.returncode != 0 and "needs --chat" in r.stderr, repr(r.stderr))
shutil.rmtree(tmp, ignore_errors=True)
sys.exit(1 if failures else 0)
