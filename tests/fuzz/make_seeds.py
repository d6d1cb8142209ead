#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets (tests/fuzz/<target>/): small valid and near-valid inputs, derived
from ../shared/models where a real file exists (configs, a trimmed safetensors header) and built by hand for our own
binary formats (trie and phrase-pool state files, rank messages). Deterministic; re-run after a format change:

    python3 tests/fuzz/make_seeds.py [SHARED_DIR]
"""
import json
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "..", "..", "shared")
MODEL = os.path.join(SHARED, "models", "stories260K")


def put(target, name, data):
    d = os.path.join(HERE, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def read(name):
    with open(os.path.join(MODEL, name), "rb") as f:
        return f.read()


def fnv1a64(b):
    h = 0xCBF29CE484222325
    for c in b:
        h = ((h ^ c) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


# ---- safetensors: the real header trimmed to three small tensors, with their real bytes
def safetensors_file(header, body):
    h = json.dumps(header, separators=(",", ":")).encode()
    return struct.pack("<Q", len(h)) + h + body


def safetensors_seeds():
    full = read("model.safetensors")
    n = struct.unpack("<Q", full[:8])[0]
    hdr = json.loads(full[8:8 + n])
    base = 8 + n
    keep = ["model.layers.0.input_layernorm.weight", "model.norm.weight", "model.layers.1.post_attention_layernorm.weight"]
    header, body = {"__metadata__": hdr["__metadata__"]}, b""
    for k in keep:
        t = hdr[k]
        b, e = t["data_offsets"]
        data = full[base + b:base + e]
        header[k] = {"dtype": t["dtype"], "shape": t["shape"], "data_offsets": [len(body), len(body) + len(data)]}
        body += data
    put("safetensors_header", "trimmed.safetensors", safetensors_file(header, body))
    half = {"a": {"dtype": "F16", "shape": [2, 2], "data_offsets": [0, 8]},
            "b": {"dtype": "BF16", "shape": [], "data_offsets": [8, 10]},
            "c": {"dtype": "F32", "shape": [0, 3], "data_offsets": [10, 10]}}
    put("safetensors_header", "dtypes.safetensors", safetensors_file(half, bytes(range(10))))
    bad = dict(half)
    bad["a"] = {"dtype": "F16", "shape": [2, 2], "data_offsets": [0, 9]}
    put("safetensors_header", "bad_offsets.safetensors", safetensors_file(bad, bytes(range(10))))
    put("safetensors_header", "long_header.safetensors", struct.pack("<Q", 1000) + b"{}")
    put("safetensors_header", "empty_header.safetensors", safetensors_file({}, b""))

    wm = {"x": "a.safetensors", "y": "a.safetensors", "z": "b.safetensors"}
    put("safetensors_index", "valid.json", json.dumps({"metadata": {"total_size": 18}, "weight_map": wm}))
    put("safetensors_index", "one_shard.json", json.dumps({"weight_map": {"x": "a.safetensors"}}))
    put("safetensors_index", "missing_shard.json", json.dumps({"weight_map": {"x": "c.safetensors"}}))
    put("safetensors_index", "wrong_shard.json", json.dumps({"weight_map": {"z": "a.safetensors"}}))
    put("safetensors_index", "path.json", json.dumps({"weight_map": {"x": "../a.safetensors"}}))


# ---- configs
def config_seeds():
    cfg = read("config.json")
    put("config_json", "stories260K.json", cfg)
    j = json.loads(cfg)
    q = dict(j, architectures=["Qwen2ForCausalLM"], model_type="qwen2", num_key_value_heads=2,
             eos_token_id=[2, 3], rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0, "factor": 32.0,
                                                   "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                                   "original_max_position_embeddings": 8192})
    put("config_json", "qwen2_llama3rope.json", json.dumps(q))
    put("config_json", "linear_rope.json", json.dumps(dict(j, rope_scaling={"type": "linear", "factor": 2.0})))
    m = dict(j)
    del m["hidden_size"]
    put("config_json", "missing_hidden.json", json.dumps(m))
    put("config_json", "bad_heads.json", json.dumps(dict(j, num_key_value_heads=3)))
    put("config_json", "string_layers.json", json.dumps(dict(j, num_hidden_layers="5")))

    put("generation_config", "stories260K.json", read("generation_config.json"))
    put("generation_config", "scalar_eos.json", json.dumps({"bos_token_id": 1, "eos_token_id": 2}))
    put("generation_config", "out_of_vocab.json", json.dumps({"eos_token_id": [1, 600], "bos_token_id": -4}))
    put("generation_config", "sampling.json", json.dumps({"do_sample": True, "temperature": 0.7, "top_p": 0.9}))

    tc = read("tokenizer_config.json")
    put("tokenizer_config", "stories260K.json", tc)
    put("tokenizer_config", "no_bos.json", json.dumps(dict(json.loads(tc), add_bos_token=False)))
    put("tokenizer_config", "bos_string.json", json.dumps({"add_bos_token": "yes"}))

    tm = read("tokenizer.model")
    put("tokenizer_model", "tok512.model", tm)
    put("tokenizer_model", "truncated.model", tm[:1000])


# ---- tokenizer.json: byte-level BPE files in the GPT-2, Llama-3 and Qwen2 layouts, 256 byte tokens + a few merges
def byte_level(raw):
    keep = [b for b in range(256) if 33 <= b <= 126 or 161 <= b <= 172 or 174 <= b <= 255]
    table, n = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + n)
            n += 1
    return "".join(table[b] for b in raw.encode())


def tokenizer_json(merges, pre, post=None, normalizer=None, added=()):
    vocab = {}
    keep = [b for b in range(256) if 33 <= b <= 126 or 161 <= b <= 172 or 174 <= b <= 255]
    n = 0
    for b in range(256):
        ch = chr(b) if b in keep else chr(256 + n)
        n += b not in keep
        vocab[ch] = b
    ms = []
    for a, c in merges:
        m = byte_level(a + c)
        vocab.setdefault(m, len(vocab))
        ms.append(byte_level(a) + " " + byte_level(c))
    toks = []
    for content, special in added:
        toks.append({"id": len(vocab) + len(toks), "content": content, "single_word": False, "lstrip": False,
                     "rstrip": False, "normalized": not special, "special": special})
    return json.dumps({"version": "1.0", "added_tokens": toks, "normalizer": normalizer, "pre_tokenizer": pre,
                       "post_processor": post or {"type": "ByteLevel"}, "decoder": {"type": "ByteLevel"},
                       "model": {"type": "BPE", "dropout": None, "unk_token": None, "vocab": vocab, "merges": ms}},
                      ensure_ascii=False, separators=(",", ":"))


def sp_tokenizer_json(normalizer, pre, decoder):
    """A SentencePiece-style BPE: <unk> <s> </s>, the byte tokens <0x00>..<0xFF>, then a few metaspace pieces."""
    meta = "\u2581"
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for b in range(256):
        vocab["<0x%02X>" % b] = 3 + b
    for t in [meta, "h", "e", "l", "o", "he", meta + "he", "ll", meta + "hell", "1", "2"]:
        vocab.setdefault(t, len(vocab))
    merges = [["h", "e"], [meta, "he"], ["l", "l"], [meta + "he", "ll"]]
    added = [{"id": i, "content": c, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
              "special": True} for i, c in enumerate(["<unk>", "<s>", "</s>"])]
    post = {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                                     {"Sequence": {"id": "A", "type_id": 0}}],
            "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}}
    return json.dumps({"version": "1.0", "added_tokens": added, "normalizer": normalizer, "pre_tokenizer": pre,
                       "post_processor": post, "decoder": decoder,
                       "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "fuse_unk": True,
                                 "byte_fallback": True, "vocab": vocab, "merges": merges}},
                      ensure_ascii=False, separators=(",", ":"))


def tokenizer_json_seeds():
    merges = [(" ", "t"), ("h", "e"), (" t", "he"), ("i", "n"), ("1", "2"), ("e", "r")]
    gpt2 = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    put("tokenizer_json", "gpt2.json", tokenizer_json(merges, gpt2))
    llama3_re = ("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
                 "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")
    pre3 = {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": llama3_re}, "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]}
    bos = "<|begin_of_text|>"
    post3 = {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": bos, "type_id": 0}},
                                                      {"Sequence": {"id": "A", "type_id": 0}}],
             "special_tokens": {bos: {"id": bos, "ids": [262], "tokens": [bos]}}}
    put("tokenizer_json", "llama3.json", tokenizer_json(merges, pre3, post3, None,
                                                        [(bos, True), ("<|end_of_text|>", True)]))
    qwen = {"type": "Sequence", "pretokenizers": [
        {"type": "Digits", "individual_digits": True},
        {"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithNext", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "use_regex": False}]}
    put("tokenizer_json", "qwen2_nfc.json", tokenizer_json(merges[:3], qwen, None, {"type": "NFC"},
                                                           [("<|im_start|>", True), ("hello", False)]))
    put("tokenizer_json", "unigram.json", json.dumps({"model": {"type": "Unigram", "vocab": [["a", 0.0]]}}))
    # SentencePiece-style files (byte fallback, no ByteLevel): the Llama-2, Gemma and Metaspace pipelines.
    meta = "\u2581"
    rep = lambda a, b: {"type": "Replace", "pattern": {"String": a}, "content": b}
    llama2_norm = {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": meta}, rep(" ", meta)]}
    llama2_dec = {"type": "Sequence", "decoders": [rep(meta, " "), {"type": "ByteFallback"}, {"type": "Fuse"},
                                                   {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}
    put("tokenizer_json", "llama2_sp.json", sp_tokenizer_json(llama2_norm, None, llama2_dec))
    gemma_pre = {"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithPrevious", "invert": False}
    gemma_dec = {"type": "Sequence", "decoders": [rep(meta, " "), {"type": "ByteFallback"}, {"type": "Fuse"}]}
    put("tokenizer_json", "gemma_sp.json", sp_tokenizer_json(rep(" ", meta), gemma_pre, gemma_dec))
    mix_norm = {"type": "Sequence", "normalizers": [{"type": "Strip", "strip_left": True, "strip_right": True},
                                                    {"type": "NFKC"}, {"type": "Lowercase"},
                                                    {"type": "Replace", "pattern": {"Regex": "\\s+"}, "content": " "}]}
    mix_pre = {"type": "Sequence", "pretokenizers": [
        {"type": "Digits", "individual_digits": True},
        {"type": "Metaspace", "replacement": meta, "prepend_scheme": "first", "split": True}]}
    mix_dec = {"type": "Sequence", "decoders": [{"type": "ByteFallback"},
                                                {"type": "Metaspace", "replacement": meta, "prepend_scheme": "always"}]}
    put("tokenizer_json", "metaspace_mix.json", sp_tokenizer_json(mix_norm, mix_pre, mix_dec))


# ---- JSONL prompt records
def prompt_seeds():
    put("prompt_jsonl", "records.jsonl", '{"id": 1, "prompt": "Once upon a time"}\n'
                                         '{"id": "b", "prompt_ids": [1, 403, 407]}\n\n'
                                         '{"prompt": "no id", "extra": [1, {"x": null}]}\n')
    put("prompt_jsonl", "bad.jsonl", '{"id": 1, "prompt": 5}\n{"prompt_ids": []}\n{"prompt_ids": [1.5]}\n[1,2]\n')
    put("prompt_jsonl", "big_ids.jsonl", '{"prompt_ids": [2147483647, -2147483648, 0]}\n')
    put("prompt_jsonl", "own.jsonl", '{"prompt": "a", "max_new_tokens": 5, "temperature": 0.7, "top_k": 3}\n'
                                     '{"prompt": "b", "top_p": 0.9, "seed": 9223372036854775807, "max_tokens": 5}\n'
                                     '{"prompt": "c", "temperature": -1}\n{"prompt": "d", "top_p": 1e-60}\n'
                                     '{"prompt": "e", "stop": ["\\n\\n", "Q:"]}\n{"prompt": "f", "stop": ""}\n')


# ---- JSONL tokenize records (tokenize --input, with and without --decode)
def tokenize_seeds():
    put("tokenize_jsonl", "records.jsonl", '{"id": "a", "text": "Once upon a time"}\n'
                                           '{"prompt": "Lily went"}\n\n{"id": 7, "text": ""}\n')
    put("tokenize_jsonl", "decode.jsonl", '{"id": 1, "ids": [1, 403, 407]}\n{"ids": [2147483647, 0]}\n')
    put("resume_jsonl", "records.jsonl", '{"id": 0, "prompt_ids": [1, 5], "ids": [7, 8], "text": "hi", '
                                         '"finish_reason": "length", "stats": {"steps": 2}}\n\n{"id": "b", "ids": []}\n')
    put("resume_jsonl", "bad.jsonl", '{"ids": [1]}\n[1, 2]\n{"id": 1\n{"id": {"nested": [1, [2, [3]]]}}\n')
    put("tokenize_jsonl", "bad.jsonl", '{"id": 1, "ids": [5, -2]}\n{"ids": "1,2"}\n{"text": 5}\n[1,2]\n'
                                       '{"ids": [4294967297]}\n')


# ---- trie state: magic, u32 version 1, u32 branch length, u64 count, {i32 token, u32 parent, f64 gen}, then
# the FNV-1a checksum, left out here: the state-file targets append it to their input (fuzz_common.h).
def trie_file(nodes, branch=12):
    s = b"LATRIE\r\n" + struct.pack("<IIQ", 1, branch, len(nodes))
    for tok, parent, gen in nodes:
        s += struct.pack("<iId", tok, parent, gen)
    return s


def trie_seeds():
    put("trie_state", "empty.state", trie_file([]))
    put("trie_state", "small.state", trie_file([(1, 0, 4.0), (2, 1, 3.0), (3, 2, 2.0), (4, 1, 1.0), (9, 0, 1.5)]))
    chain = [(5, 0, 8.0)] + [(6 + i, i + 1, 8.0 - i * 0.5) for i in range(10)]
    put("trie_state", "chain.state", trie_file(chain))
    wide = [(t, 0, 1.0) for t in range(80)]  # more than the target's capacity: pruned after load
    put("trie_state", "wide.state", trie_file(wide))
    bad = trie_file([(1, 0, 1.0), (2, 1, 2.0)])  # child with more frequency than its parent
    put("trie_state", "bad_freq.state", bad)
    put("trie_state", "with_checksum.state", trie_file([(1, 0, 2.0)]) + struct.pack("<Q", fnv1a64(trie_file([(1, 0, 2.0)]))))


# ---- suffix state (suffix_state.h): magic, u32 version 1, i32 vocab, u64 model, u64 count, {u32 len, i32[len]}
# (checksum left out, as for the trie). The fuzz target's state expects vocab 64 and model 0 (not checked).
def suffix_file(seqs, vocab=64, model=0):
    s = b"LASUFX\r\n" + struct.pack("<IiQQ", 1, vocab, model, len(seqs))
    for q in seqs:
        s += struct.pack("<I", len(q)) + b"".join(struct.pack("<i", t) for t in q)
    return s


def suffix_seeds():
    put("suffix_state", "empty.state", suffix_file([]))
    put("suffix_state", "small.state", suffix_file([[1, 2, 3, 1, 2, 4], [5, 6], []]))
    put("suffix_state", "repeat.state", suffix_file([[7, 8] * 40, [7, 8, 9] * 10]))
    put("suffix_state", "wrong_vocab.state", suffix_file([[1, 2]], vocab=63))
    put("suffix_state", "bad_token.state", suffix_file([[1, 64]]))


# ---- phrase pool state: magic, u32 version 1, u32 0, u64 keys, {i32 key, u32 count, {u32 len, i32[len]}}
# (checksum left out, as for the trie)
def pool_file(keys):
    s = b"LAPHRASE" + struct.pack("<IIQ", 1, 0, len(keys))
    for key, phrases in keys:
        s += struct.pack("<iI", key, len(phrases))
        for ph in phrases:
            s += struct.pack("<I", len(ph)) + b"".join(struct.pack("<i", t) for t in ph)
    return s


def pool_seeds():
    put("phrase_pool_state", "empty.state", pool_file([]))
    put("phrase_pool_state", "small.state", pool_file([(1, [[1, 2, 3], [1]]), (5, [[5, 6]])]))
    put("phrase_pool_state", "many.state", pool_file([(2, [[2, i] for i in range(6)]), (-1, [[-1, 0]])]))
    put("phrase_pool_state", "wrong_key.state", pool_file([(1, [[2, 3]])]))


# ---- rank messages (protocol.h, as rank 0 sends them to rank 1 of 2 over MPI): [u32 words][words...] per message
MAGIC = 0x4C410003  # protocol version 3 (BEGIN's step rows)


def msgs(*ms):
    out = b""
    for m in ms:
        out += struct.pack("<I", len(m)) + b"".join(struct.pack("<i", w) for w in m)
    return out


def wire_seeds():
    f = lambda x: struct.unpack("<i", struct.pack("<f", x))[0]
    begin = [MAGIC, 1, 0, 8, 0, 3, 1, 10, 11, f(0.0), 0, f(1.0), 7, 0, 0, 0]  # 8 step rows, prompt [1, 10, 11]
    # RUN: no commit; sync keep 3 add 0; k=2; 1 part: rank 1, 3 nodes (tokens, parents, verify, global)
    run1 = [MAGIC, 2, 1, 0, 3, 0, 2, 1, 1, 3, 11, 20, 21, -1, 0, 1, 1, 1, 0, 0, 2, 5]
    # RUN with the commit of the previous step: sync keep 3 add [20], path [0, 2]
    run2 = [MAGIC, 2, 2, 1, 3, 1, 20, 2, 0, 2, 4, 0, 2, 1, 1, 2, 20, 30, -1, 0, 1, 0, 0, 1]
    end, shut = [MAGIC, 3, 3], [MAGIC, 4, 4]
    put("protocol", "session.bin", msgs(begin, run1, run2, end, shut))
    put("protocol", "begin_run.bin", msgs(begin, run1))
    nccl = [MAGIC, 2, 1, 0, 3, 0, 2, 2, 1, 1, 11, -1, 1, 0, 1, 2, 11, 20, -1, 0, 1, 1, 0, 3]
    put("protocol", "two_parts.bin", msgs(begin, nccl))
    put("protocol", "reply.bin", msgs([1, 0, 4, 1234, 20, 21, 22]))
    # BATCH (batched steps): BEGIN slot 0 (64 rows, prompt [1, 10, 11]) + a 1-token CHUNK; then slot 0's PART (the
    # part of run1); then its COMMIT (sync keep 3 add [20], path [0, 2]) and END; then SHUTDOWN.
    b0 = [MAGIC, 5, 0, 2, 3, 0, 64, 0, 3, 1, 10, 11, f(0.0), 0, f(1.0), 7, 0, 0, 0, 4, 0, 1]
    b1 = [MAGIC, 5, 1, 1, 5, 0, 3, 0, 2, 1, 1, 3, 11, 20, 21, -1, 0, 1, 1, 1, 0, 0, 2, 5]
    b2 = [MAGIC, 5, 2, 2, 1, 0, 3, 1, 20, 2, 0, 2, 2, 0]
    put("protocol", "batch_session.bin", msgs(b0, b1, b2, [MAGIC, 4, 3]))
    # BATCH REPLY: 1 item, slot 0, cache 3, 3 forward tokens, 3 results.
    put("protocol", "batch_reply.bin", msgs([1, 0, 1234, 1, 0, 3, 3, 3, 20, 21, 22]))


if __name__ == "__main__":
    safetensors_seeds()
    config_seeds()
    tokenizer_json_seeds()
    prompt_seeds()
    tokenize_seeds()
    trie_seeds()
    pool_seeds()
    suffix_seeds()
    wire_seeds()
