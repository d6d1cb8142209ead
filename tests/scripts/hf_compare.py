"""Compares the engine with Hugging Face transformers on small randomly initialised models.

For several configs (GQA, MHA, attention bias, Llama-3 rope scaling, linear rope scaling, untied head) it builds
LlamaForCausalLM with transformers, save_pretrained()s it, then checks (fp32, CPU):
  * `lookahead score` logits of a random sequence equal transformers' logits (max abs diff <= 1e-4 relative);
  * `lookahead generate` greedy ids equal transformers' greedy generate(), for plain decoding and for LADE.
Prints one line per check and exits non-zero on any mismatch.
"""
import json, os, subprocess, sys, tempfile

import torch
from transformers import LlamaConfig, LlamaForCausalLM

BIN = sys.argv[1]
torch.manual_seed(0)

CONFIGS = {
    "gqa": dict(num_attention_heads=8, num_key_value_heads=2),
    "mha_untied": dict(num_attention_heads=4, num_key_value_heads=4, tie_word_embeddings=False),
    "bias": dict(num_attention_heads=8, num_key_value_heads=4, attention_bias=True),
    "llama3_rope": dict(num_attention_heads=8, num_key_value_heads=2, rope_theta=500000.0,
                        rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                      "high_freq_factor": 4.0, "original_max_position_embeddings": 32}),
    "linear_rope_tied": dict(num_attention_heads=8, num_key_value_heads=8, tie_word_embeddings=True,
                             rope_scaling={"rope_type": "linear", "factor": 2.0}),
}

failures = 0


def check(name, ok, detail=""):
    global failures
    print(("ok: " if ok else "FAIL: ") + name + (" " + detail if detail else ""))
    if not ok:
        failures += 1


for name, extra in CONFIGS.items():
    kw = dict(vocab_size=512, hidden_size=64, intermediate_size=160, num_hidden_layers=3, max_position_embeddings=256,
              rms_norm_eps=1e-5, bos_token_id=1, eos_token_id=2, tie_word_embeddings=False)
    kw.update(extra)
    cfg = LlamaConfig(**kw)
    model = LlamaForCausalLM(cfg).eval()
    with torch.no_grad():  # larger weights than the default init, so logits are far from uniform
        for p in model.parameters():
            if p.dim() == 2:
                p.normal_(0, 0.15)
            elif "norm" not in "":
                p.add_(torch.randn_like(p) * 0.05)
    d = tempfile.mkdtemp(prefix=f"hf-{name}-")
    model.save_pretrained(d, safe_serialization=True)
    g = torch.Generator().manual_seed(1)
    ids = [1] + torch.randint(3, 512, (40,), generator=g).tolist()
    with torch.no_grad():
        ref = model(torch.tensor([ids])).logits[0].float()
    out = subprocess.run([BIN, "score", "--model", d, "--ids", ",".join(map(str, ids))], capture_output=True, text=True)
    if out.returncode != 0:
        check(f"{name} score", False, out.stderr.strip())
        continue
    got = torch.tensor(json.loads(out.stdout)["logits"]).view(len(ids), -1)
    diff = (got - ref).abs().max().item()
    scale = ref.abs().max().item()
    check(f"{name} logits", diff <= 1e-4 * max(1.0, scale), f"max|diff|={diff:.2e} (max|logit|={scale:.1f})")
    # greedy generation
    prompts = [ids[:8], ids[:3], [1] + ids[10:30]]
    with open(os.path.join(d, "in.jsonl"), "w") as f:
        for i, p in enumerate(prompts):
            f.write(json.dumps({"id": i, "prompt_ids": p}) + "\n")
    n_new = 40
    want = []
    with torch.no_grad():
        for p in prompts:
            o = model.generate(torch.tensor([p]), max_new_tokens=n_new, do_sample=False, eos_token_id=2,
                               pad_token_id=0)
            want.append(o[0, len(p):].tolist())
    for strategy in ["ar", "lade", "trie"]:
        outp = os.path.join(d, f"out-{strategy}.jsonl")
        r = subprocess.run([BIN, "generate", "--model", d, "--tokenizer", sys.argv[2], "--input",
                            os.path.join(d, "in.jsonl"), "--output", outp, "--max-new-tokens", str(n_new),
                            "--strategy", strategy, "--quiet"], capture_output=True, text=True)
        if r.returncode != 0:
            check(f"{name} generate {strategy}", False, r.stderr.strip())
            continue
        got_ids = [r["ids"] for r in sorted(map(json.loads, open(outp)), key=lambda r: r["id"])]  # finishing order
        check(f"{name} greedy {strategy} == transformers.generate", got_ids == want,
              "" if got_ids == want else f"\n  got  {got_ids}\n  want {want}")

sys.exit(1 if failures else 0)
