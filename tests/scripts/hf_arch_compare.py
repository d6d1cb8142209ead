"""The engine against Hugging Face transformers on Qwen3, Phi-3, Gemma-2, Gemma-3 and Mistral-Nemo-style models.

For each architecture, a small random model is built by transformers from a reduced config with the architecture's
own features switched on (q/k norms and a head_dim independent of hidden; fused qkv/gate_up, partial rotary and a
sliding window; GeGLU, (1 + w) norms, sandwich norms, embedding scaling, attention and final soft-capping and
alternating sliding-window layers; Gemma-3's local RoPE base; head_dim x heads != hidden), save_pretrained as
safetensors, then (fp32, CPU):
  * `lookahead score` logits at every position of a sequence longer than the sliding windows equal transformers'
    logits within 1e-4 (relative to the largest logit when that exceeds 1), on the ATen forward (--kernels off)
    and on the default one (the CPU kernels);
  * tree steps: `test_model --gtest_filter=HfTree.*` puts a random tree (nodes around the sliding-window edge) on
    top of a prefix and compares each node's logits with transformers' logits of its root-to-node path (ATen and
    CPU kernels);
  * `lookahead generate` greedy ids equal transformers' generate() for plain decoding and for every strategy (with
    --adaptive off, so that every step carries the strategy's full draft tree).
Prints one line per check; exits non-zero on any mismatch.

  python hf_arch_compare.py LOOKAHEAD_BIN TOKENIZER_DIR [TEST_MODEL_BIN]
"""
import json, os, random, shutil, subprocess, sys, tempfile

os.environ.setdefault("OMP_NUM_THREADS", "1")  # tiny models: threads only cost CPU time on a shared machine

import torch
import transformers as tf

BIN, TOK = sys.argv[1], sys.argv[2]
TEST_MODEL = sys.argv[3] if len(sys.argv) > 3 else ""
torch.manual_seed(0)
torch.set_num_threads(1)  # tiny models: threads only cost CPU time on a shared machine
V = 512

COMMON = dict(vocab_size=V, hidden_size=64, intermediate_size=96, num_hidden_layers=4, max_position_embeddings=160,
              rms_norm_eps=1e-6, bos_token_id=1, eos_token_id=2, pad_token_id=0)

ARCHS = {
    # Qwen3: q/k norms, head_dim 32 with 4 heads over hidden 64.
    "qwen3": (tf.Qwen3Config, tf.Qwen3ForCausalLM,
              dict(num_attention_heads=4, num_key_value_heads=2, head_dim=32, tie_word_embeddings=False,
                   rope_theta=1e6)),
    # Phi-3: fused projections, a window of 9 on every layer, rotary on half of each head.
    "phi3": (tf.Phi3Config, tf.Phi3ForCausalLM,
             dict(num_attention_heads=4, num_key_value_heads=2, sliding_window=9, partial_rotary_factor=0.5,
                  tie_word_embeddings=False)),
    # Gemma-2: sliding window 7 on even layers, soft caps small enough to bite, query_pre_attn_scalar != head_dim.
    "gemma2": (tf.Gemma2Config, tf.Gemma2ForCausalLM,
               dict(num_attention_heads=4, num_key_value_heads=2, head_dim=16, sliding_window=7,
                    attn_logit_softcapping=4.0, final_logit_softcapping=5.0, query_pre_attn_scalar=24)),
    # Gemma-3 (text): q/k norms, local layers with window 6 and their own RoPE base, one global layer with linear
    # RoPE scaling.
    "gemma3": (tf.Gemma3TextConfig, tf.Gemma3ForCausalLM,
               dict(num_attention_heads=4, num_key_value_heads=1, head_dim=16, sliding_window=6,
                    layer_types=["sliding_attention", "sliding_attention", "full_attention", "sliding_attention"],
                    rope_parameters={"full_attention": {"rope_type": "linear", "factor": 4.0, "rope_theta": 1e6},
                                     "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}},
                    query_pre_attn_scalar=16)),
    # Mistral-Nemo's shape in small: head_dim x heads (128) != hidden (80), no window.
    "nemo": (tf.MistralConfig, tf.MistralForCausalLM,
             dict(hidden_size=80, num_attention_heads=4, num_key_value_heads=2, head_dim=32, sliding_window=None,
                  tie_word_embeddings=False, rope_theta=1e6)),
    # Mistral-7B-v0.1's window on every layer.
    "mistral_window": (tf.MistralConfig, tf.MistralForCausalLM,
                       dict(num_attention_heads=4, num_key_value_heads=2, sliding_window=5)),
}

failures = 0


def check(name, ok, detail=""):
    global failures
    print(("ok: " if ok else "FAIL: ") + name + (" " + detail if detail else ""), flush=True)
    if not ok:
        failures += 1


def close(got, ref):
    diff = (got - ref).abs().max().item()
    scale = ref.abs().max().item()
    return diff <= 1e-4 * max(1.0, scale), f"max|diff|={diff:.2e} (max|logit|={scale:.1f})"


only = set(os.environ.get("LA_HF_ARCHS", "").split(",")) - {""}
for name, (Cfg, Model, extra) in ARCHS.items():
    if only and name not in only:
        continue
    kw = dict(COMMON)
    kw.update(extra)
    cfg = Cfg(**kw)
    cfg._attn_implementation = "eager"  # soft-capping needs eager attention in transformers
    model = Model(cfg).eval()
    with torch.no_grad():  # larger weights than the default init, so logits are far from uniform
        for n, p in model.named_parameters():
            if p.dim() == 2:
                p.normal_(0, 0.15)
            else:  # norms (Gemma's start at zero: (1 + w)) and biases
                p.add_(torch.randn_like(p) * 0.1)
    d = tempfile.mkdtemp(prefix=f"hf-arch-{name}-")
    model.save_pretrained(d, safe_serialization=True)
    g = torch.Generator().manual_seed(1)
    ids = [1] + torch.randint(3, V, (39,), generator=g).tolist()
    with torch.no_grad():
        ref = model(torch.tensor([ids])).logits[0].float()
    out = subprocess.run([BIN, "score", "--model", d, "--ids", ",".join(map(str, ids)), "--kernels", "off"],
                         capture_output=True, text=True)
    if out.returncode != 0:
        check(f"{name} score", False, out.stderr.strip())
        continue
    got = torch.tensor(json.loads(out.stdout)["logits"]).view(len(ids), -1)
    ok, detail = close(got, ref)
    check(f"{name} logits at all {len(ids)} positions", ok, detail)
    out = subprocess.run([BIN, "score", "--model", d, "--ids", ",".join(map(str, ids))], capture_output=True, text=True)
    if out.returncode == 0:  # the default path (--kernels on) too
        ok, detail = close(torch.tensor(json.loads(out.stdout)["logits"]).view(len(ids), -1), ref)
        check(f"{name} logits, default kernels setting", ok, detail)
    else:
        check(f"{name} score (kernels on)", False, out.stderr.strip())

    # save-model writes the features back (config fields transformers reads): transformers loads the copy and
    # gives the same logits.
    d2 = d + "-saved"
    os.makedirs(d2, exist_ok=True)
    r = subprocess.run([BIN, "save-model", "--model", d, "--out", d2], capture_output=True, text=True)
    if r.returncode != 0:
        check(f"{name} save-model", False, r.stderr.strip())
    else:
        try:
            with torch.no_grad():
                again = type(model).from_pretrained(d2, attn_implementation="eager").eval()
                ok, detail = close(again(torch.tensor([ids])).logits[0].float(), ref)
        except Exception as e:  # transformers refuses the saved config
            ok, detail = False, repr(e)
        check(f"{name} save-model copy loaded by transformers gives the same logits", ok, detail)
    shutil.rmtree(d2, ignore_errors=True)

    # Tree steps on top of a prefix, nodes around the sliding-window edge: transformers' logits of each node's
    # root-to-node path, compared by test_model's HfTree test.
    if TEST_MODEL:
        rng = random.Random(7)
        trees = []
        for L in (3, 9, 16):
            ctx = [1] + [rng.randrange(3, V) for _ in range(L - 1)]
            T = 10
            parents, tokens, depth = [], [], []
            for i in range(T):
                p = -1 if i == 0 else rng.randrange(-1, i) if i % 5 == 0 else rng.randrange(max(0, i - 3), i)
                parents.append(p)
                depth.append(0 if p < 0 else depth[p] + 1)
                tokens.append(rng.randrange(3, V))
            want = []
            with torch.no_grad():
                for i in range(T):
                    path, a = [], i
                    while a >= 0:
                        path.insert(0, tokens[a])
                        a = parents[a]
                    want.append(model(torch.tensor([ctx + path])).logits[0, -1].float().tolist())
            trees.append({"ctx": ctx, "tokens": tokens, "parents": parents,
                          "positions": [L + x for x in depth], "logits": want})
        spec = os.path.join(d, "trees.json")
        json.dump({"model": d, "trees": trees}, open(spec, "w"))
        r = subprocess.run([TEST_MODEL, "--gtest_filter=HfTree.*"], capture_output=True, text=True,
                           env=dict(os.environ, LA_HF_TREES=spec))
        ok = r.returncode == 0 and "[  PASSED  ] 1 test" in r.stdout
        check(f"{name} tree steps (3 trees of 10 nodes over prefixes of 3, 9, 16) == transformers", ok,
              "" if ok else r.stdout[-2000:] + r.stderr[-1000:])

    # Greedy generation: every strategy equals transformers' greedy generate().
    prompts = [ids[:3], [1] + ids[10:30]]
    with open(os.path.join(d, "in.jsonl"), "w") as f:
        for i, p in enumerate(prompts):
            f.write(json.dumps({"id": i, "prompt_ids": p}) + "\n")
    n_new = 24
    want = []
    with torch.no_grad():
        for p in prompts:
            o = model.generate(torch.tensor([p]), max_new_tokens=n_new, do_sample=False, eos_token_id=2,
                               pad_token_id=0)
            want.append(o[0, len(p):].tolist())
    for strategy in ["ar", "jacobi", "lade", "trie", "prompt-lookup"]:
        outp = os.path.join(d, f"out-{strategy}.jsonl")
        r = subprocess.run([BIN, "generate", "--model", d, "--tokenizer", TOK, "--input",
                            os.path.join(d, "in.jsonl"), "--output", outp, "--max-new-tokens", str(n_new),
                            "--strategy", strategy, "--quiet", "--adaptive", "off", "--threads", "1"],
                           capture_output=True, text=True)
        if r.returncode != 0:
            check(f"{name} generate {strategy}", False, r.stderr.strip())
            continue
        recs = sorted((json.loads(l) for l in open(outp)), key=lambda r: r["id"])  # --batch: finishing order
        got_ids = [r["ids"] for r in recs]
        check(f"{name} greedy {strategy} == transformers.generate", got_ids == want,
              "" if got_ids == want else f"\n  got  {got_ids}\n  want {want}")
    shutil.rmtree(d, ignore_errors=True)

sys.exit(1 if failures else 0)
