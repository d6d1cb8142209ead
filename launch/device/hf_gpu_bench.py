#!/usr/bin/env python3
"""GPU-side helpers of launch/device/gpu-bench.sh (run on the GPU machine with its own python3, torch and transformers).

  hf_gpu_bench.py bandwidth                         device-to-device copy bandwidth (GB/s, bytes read + written)
  hf_gpu_bench.py floor --model random:NAME --ms-per-token X --bandwidth GBS
                                                    plain decoding vs the bandwidth floor (weight bytes / bandwidth)
  hf_gpu_bench.py prompts --vocab V --out FILE      prompt ids with repeated n-grams ({"id","prompt_ids"} JSONL)
  hf_gpu_bench.py to-bf16 --src DIR --dst DIR       an F32 Hugging Face dir (lookahead save-model) as bf16 safetensors
  hf_gpu_bench.py hf --model DIR --prompts FILE --max-new N --json OUT
                                                    transformers greedy, prompt lookup, assisted (small random draft)
  hf_gpu_bench.py table --hf OUT.json --lookahead NAME=STATS.json:OUTPUT.jsonl ...
                                                    one table: tokens/s and ratios, measured in this run
  hf_gpu_bench.py same-ids A.jsonl B.jsonl          exit 0 iff every record's ids are equal (prints first divergence)

Random models use a byte tokenizer in lookahead, so both sides get token ids, never text.
"""
import argparse, json, os, sys, time

# Parameter shapes of the random presets the benchmark uses (src/model/config.cpp): hidden, intermediate, layers,
# heads, kv heads, vocab, tied embeddings.
PRESETS = {
    "tinyllama-1.1b": (2048, 5632, 22, 32, 4, 32000, False),
    "llama-2-7b": (4096, 11008, 32, 32, 32, 32000, False),
}


def weight_params(name):
    h, i, l, heads, kv, v, tied = PRESETS[name]
    d = h // heads
    per_layer = h * (heads * d) + 2 * h * (kv * d) + (heads * d) * h + 3 * h * i + 2 * h
    return v * h * (1 if tied else 2) + l * per_layer + h


def cmd_bandwidth(a):
    import torch
    n = 1 << 30  # 1 GiB each way
    src = torch.empty(n, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    torch.cuda.synchronize()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    reps = 20
    e0.record()
    for _ in range(reps):
        dst.copy_(src)
    e1.record()
    torch.cuda.synchronize()
    s = e0.elapsed_time(e1) / 1e3 / reps
    gbs = 2 * n / s / 1e9
    print(f"device {torch.cuda.get_device_name()}: copy of {n >> 20} MiB: {s * 1e3:.3f} ms, {gbs:.0f} GB/s (read + write)")
    print(f"BANDWIDTH_GBS={gbs:.1f}")


def cmd_floor(a):
    name = a.model.split(":")[1] if a.model.startswith("random:") else a.model
    p = weight_params(name)
    wbytes = p * a.bytes_per_param
    floor_tps = a.bandwidth * 1e9 / wbytes
    tps = 1e3 / a.ms_per_token
    print(f"{'model':<22}{'params':>14}{'weight GB':>11}{'BW GB/s':>10}{'floor tok/s':>13}{'ms/token':>10}{'tok/s':>9}{'of floor':>10}")
    print(f"{name:<22}{p:>14,}{wbytes / 1e9:>11.2f}{a.bandwidth:>10.0f}{floor_tps:>13.1f}{a.ms_per_token:>10.3f}{tps:>9.1f}"
          f"{tps / floor_tps:>10.2f}")


def cmd_prompts(a):
    import random
    rng = random.Random(a.seed)
    with open(a.out, "w") as f:
        for k in range(a.n):
            base = [rng.randrange(3, a.vocab) for _ in range(48)]
            seg = [rng.randrange(3, a.vocab) for _ in range(12)]
            ids = [1] + base[:16] + seg + base[16:32] + seg + base[32:] + seg + seg[:6]  # repeated n-grams
            f.write(json.dumps({"id": f"rep-{k}", "prompt_ids": ids}) + "\n")
    print(f"wrote {a.n} prompt(s) of {len(ids)} ids to {a.out}")


def load_hf(path, dtype, device="cuda"):
    from transformers import AutoModelForCausalLM
    try:
        return AutoModelForCausalLM.from_pretrained(path, dtype=dtype).to(device).eval()
    except TypeError:  # transformers < 4.56
        return AutoModelForCausalLM.from_pretrained(path, torch_dtype=dtype).to(device).eval()


def cmd_to_bf16(a):
    import torch
    m = load_hf(a.src, torch.bfloat16, "cpu")
    m.save_pretrained(a.dst, safe_serialization=True)
    for f in ("generation_config.json",):
        if os.path.exists(os.path.join(a.src, f)) and not os.path.exists(os.path.join(a.dst, f)):
            open(os.path.join(a.dst, f), "w").write(open(os.path.join(a.src, f)).read())
    print(f"saved {a.dst} (bf16)")


def cmd_hf(a):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(0)
    dev = a.device
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    model = load_hf(a.model, torch.bfloat16, dev)
    cfg = model.config
    # A small random draft with the same vocabulary (transformers' assisted generation needs one).
    dcfg = LlamaConfig(vocab_size=cfg.vocab_size, hidden_size=256, intermediate_size=688, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=cfg.max_position_embeddings,
                       bos_token_id=cfg.bos_token_id, eos_token_id=cfg.eos_token_id, tie_word_embeddings=False)
    draft = LlamaForCausalLM(dcfg).to(device=dev, dtype=torch.bfloat16).eval()
    prompts = [json.loads(l) for l in open(a.prompts)]
    modes = {
        "hf-greedy": {},
        "hf-prompt-lookup": {"prompt_lookup_num_tokens": 10},
        "hf-assisted": {"assistant_model": draft},
    }
    res = {"device": torch.cuda.get_device_name() if dev == "cuda" else "cpu", "transformers": __import__("transformers").__version__, "rows": {}}
    for name, kw in modes.items():
        ids_out, tokens, secs = [], 0, 0.0
        for p in prompts:
            x = torch.tensor([p["prompt_ids"]], device=dev)
            gen = dict(max_new_tokens=a.max_new, do_sample=False, **kw)
            with torch.inference_mode():
                model.generate(x, **{**gen, "max_new_tokens": 8})  # warm-up
                sync()
                t0 = time.perf_counter()
                y = model.generate(x, **gen)
                sync()
                secs += time.perf_counter() - t0
            new = y[0, x.shape[1]:].tolist()
            tokens += len(new)
            ids_out.append(new)
        res["rows"][name] = {"tokens": tokens, "seconds": secs, "tokens_per_s": tokens / secs, "ids": ids_out}
        print(f"{name:<18} {tokens:>6} tokens {secs:>8.3f} s {tokens / secs:>9.1f} tok/s", flush=True)
    json.dump(res, open(a.json, "w"))


def cmd_table(a):
    hf = json.load(open(a.hf))
    rows = []
    for name, r in hf["rows"].items():
        rows.append((name, r["tokens"], r["seconds"], r["tokens_per_s"], None, r["ids"]))
    for spec in a.lookahead:
        name, files = spec.split("=", 1)
        stats, out = files.split(":", 1)
        s = json.load(open(stats))["aggregate"]
        recs = sorted((json.loads(l) for l in open(out)), key=lambda r: json.dumps(r["id"]))  # finishing order
        ids = [r["ids"] for r in recs]  # the generated ids (the prompt is in "prompt_ids")
        rows.append((name, s["new_tokens"], s["seconds"], s["new_tokens"] / s["seconds"], s.get("compression"), ids))
    base = next((r for r in rows if r[0] == "hf-greedy"), rows[0])
    ar = next((r for r in rows if r[0] == "lookahead-ar"), None)
    print(f"device: {hf['device']}, transformers {hf['transformers']}, bf16, same weights and prompt ids")
    print(f"{'decoder':<24}{'tokens':>8}{'seconds':>10}{'tok/s':>10}{'x HF greedy':>13}{'x our AR':>10}{'S':>7}  same ids as HF greedy")
    for name, tok, sec, tps, comp, ids in rows:
        same = "yes" if ids == base[5] else f"no (first diff at {first_diff(ids, base[5])})"
        print(f"{name:<24}{tok:>8}{sec:>10.3f}{tps:>10.1f}{tps / base[3]:>13.2f}"
              f"{(tps / ar[3]) if ar else float('nan'):>10.2f}{comp if comp else float('nan'):>7.2f}  {same}")
    print("bf16: ids may differ between implementations (rounding order); lossless is checked in fp32 (part e).")


def first_diff(a, b):
    for k, (x, y) in enumerate(zip(a, b)):
        if x != y:
            n = next((i for i, (u, v) in enumerate(zip(x, y)) if u != v), min(len(x), len(y)))
            return f"prompt {k} token {n}"
    return "lengths"


def cmd_same_ids(a):
    A = sorted((json.loads(l) for l in open(a.a)), key=lambda r: json.dumps(r["id"]))  # --batch: finishing order
    B = sorted((json.loads(l) for l in open(a.b)), key=lambda r: json.dumps(r["id"]))
    ia, ib = [r["ids"] for r in A], [r["ids"] for r in B]
    if ia == ib:
        print(f"same ids ({len(ia)} records)")
        return 0
    print(f"DIFFERENT: {first_diff(ia, ib)}")
    return 1


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("bandwidth")
    p = sub.add_parser("floor")
    p.add_argument("--model", required=True)
    p.add_argument("--ms-per-token", type=float, required=True)
    p.add_argument("--bandwidth", type=float, required=True)
    p.add_argument("--bytes-per-param", type=float, default=2.0)
    p = sub.add_parser("prompts")
    p.add_argument("--vocab", type=int, required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--n", type=int, default=2)
    p.add_argument("--seed", type=int, default=1)
    p = sub.add_parser("to-bf16")
    p.add_argument("--src", required=True)
    p.add_argument("--dst", required=True)
    p = sub.add_parser("hf")
    p.add_argument("--model", required=True)
    p.add_argument("--prompts", required=True)
    p.add_argument("--max-new", type=int, default=128)
    p.add_argument("--json", required=True)
    p.add_argument("--device", default="cuda", help="cpu: a smoke test of the script where there is no GPU")
    p = sub.add_parser("table")
    p.add_argument("--hf", required=True)
    p.add_argument("--lookahead", nargs="*", default=[])
    p = sub.add_parser("same-ids")
    p.add_argument("a")
    p.add_argument("b")
    a = ap.parse_args()
    return {"bandwidth": cmd_bandwidth, "floor": cmd_floor, "prompts": cmd_prompts, "to-bf16": cmd_to_bf16,
            "hf": cmd_hf, "table": cmd_table, "same-ids": cmd_same_ids}[a.cmd](a) or 0


if __name__ == "__main__":
    sys.exit(main())
