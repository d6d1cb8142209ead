#!/usr/bin/env python3
"""Writes tests/core/data/gguf_fixture.gguf, the reader's known-answer file (tests/core/test_gguf.cpp):

* one metadata key of every GGUF value type, arrays of several element types and an array of arrays;
* for each block type the engine dequantizes, a tensor "q.<TYPE>" of random blocks (2 rows) and "expect.<TYPE>",
  the same values dequantized by the `gguf` package's numpy code (gguf.quants.dequantize, which transformers uses
  when it loads a GGUF), so the C++ dequantizer is checked bit for bit against an independent implementation.

With --tiny-model it writes instead a tiny llama-architecture model (2 layers, hidden 32, Q8_0 and F32 weights, a
SentencePiece-style vocabulary of bytes and a few pieces, a ChatML template): the second seed of fuzz_gguf.

Run with the venv python of launch/setup.sh (it has gguf 0.19):
  PY=$(cat build/.venv-path)/bin/python
  $PY tests/core/data/make_gguf_fixture.py tests/core/data/gguf_fixture.gguf
  $PY tests/core/data/make_gguf_fixture.py --tiny-model tests/fuzz/gguf/tiny_llama.gguf
"""
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as Q
from gguf.constants import GGML_QUANT_SIZES


def random_blocks(rng, qtype, n_blocks):
    block, size = GGML_QUANT_SIZES[qtype]
    raw = rng.integers(0, 256, size=(n_blocks, size), dtype=np.uint8)
    # f16 scale fields: finite, moderate values (random bytes would give inf/NaN, whose payloads differ by library)
    def f16(n):
        return rng.normal(0, 0.05, size=(n_blocks, n)).astype(np.float16).view(np.uint8).reshape(n_blocks, 2 * n)
    if qtype in (Q.Q4_0, Q.Q5_0, Q.Q8_0):
        raw[:, 0:2] = f16(1)
    elif qtype in (Q.Q4_1, Q.Q5_1):
        raw[:, 0:4] = f16(2)
    elif qtype in (Q.Q4_K, Q.Q5_K):
        raw[:, 0:4] = f16(2)
    elif qtype == Q.Q6_K:
        raw[:, size - 2:size] = f16(1)
    return raw


def main(out):
    rng = np.random.default_rng(20261125)
    w = gguf.GGUFWriter(out, "fixture")
    w.add_uint8("t.u8", 200)
    w.add_int8("t.i8", -7)
    w.add_uint16("t.u16", 65000)
    w.add_int16("t.i16", -32000)
    w.add_uint32("t.u32", 4000000000)
    w.add_int32("t.i32", -2000000000)
    w.add_float32("t.f32", 0.25)
    w.add_bool("t.bool", True)
    w.add_string("t.str", "h\u00e9llo \u2581world")
    w.add_uint64("t.u64", 18000000000000000000)
    w.add_int64("t.i64", -9000000000000000000)
    w.add_float64("t.f64", -1.5e300)
    w.add_array("t.arr_str", ["a", "", "\u00fc"])
    w.add_key_value("t.arr_i32", [1, -2, 3], gguf.GGUFValueType.ARRAY, gguf.GGUFValueType.INT32)
    w.add_key_value("t.arr_f32", [0.5, -0.25], gguf.GGUFValueType.ARRAY, gguf.GGUFValueType.FLOAT32)
    w.add_key_value("t.arr_bool", [True, False], gguf.GGUFValueType.ARRAY, gguf.GGUFValueType.BOOL)
    w.add_key_value("t.arr_arr", [[1, 2], [3]], gguf.GGUFValueType.ARRAY, gguf.GGUFValueType.ARRAY)
    for qt in (Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1, Q.Q8_0, Q.Q4_K, Q.Q5_K, Q.Q6_K):
        block, size = GGML_QUANT_SIZES[qt]
        per_row = 512 // block
        raw = random_blocks(rng, qt, 2 * per_row).reshape(2, per_row * size)
        w.add_tensor("q." + qt.name, raw, raw_dtype=qt)
        w.add_tensor("expect." + qt.name, gguf.quants.dequantize(raw, qt).astype(np.float32))
    x = rng.normal(0, 1, size=(2, 16)).astype(np.float32)
    w.add_tensor("q.F16", x.astype(np.float16))
    w.add_tensor("expect.F16", x.astype(np.float16).astype(np.float32))
    bf = gguf.quants.quantize(x, Q.BF16)
    w.add_tensor("q.BF16", bf, raw_dtype=Q.BF16)
    w.add_tensor("expect.BF16", gguf.quants.dequantize(bf, Q.BF16).astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def tiny_model(out):
    rng = np.random.default_rng(7)
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    tokens += ["\u2581a", "\u2581the", "\u2581cat", "at", "\u2581s", "on", "\u2581", "t", "h", "e"]
    types = [2, 3, 3] + [6] * 256 + [1] * 10
    scores = [0.0] * 259 + [-float(i) for i in range(10)]
    V, H, F, L = len(tokens), 32, 64, 2
    w = gguf.GGUFWriter(out, "llama")
    w.add_context_length(64)
    w.add_embedding_length(H)
    w.add_block_count(L)
    w.add_feed_forward_length(F)
    w.add_head_count(4)
    w.add_head_count_kv(2)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type(7)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_chat_template("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
                        "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
                        "{% endif %}")

    def mat(name, rows, cols):
        x = rng.normal(0, 0.2, size=(rows, cols)).astype(np.float32)
        w.add_tensor(name, gguf.quants.quantize(x, Q.Q8_0), raw_dtype=Q.Q8_0)

    mat("token_embd.weight", V, H)
    for l in range(L):
        p = f"blk.{l}."
        w.add_tensor(p + "attn_norm.weight", np.ones(H, np.float32))
        mat(p + "attn_q.weight", H, H)
        mat(p + "attn_k.weight", 16, H)
        mat(p + "attn_v.weight", 16, H)
        mat(p + "attn_output.weight", H, H)
        w.add_tensor(p + "ffn_norm.weight", np.ones(H, np.float32))
        mat(p + "ffn_gate.weight", F, H)
        mat(p + "ffn_up.weight", F, H)
        w.add_tensor(p + "ffn_down.weight", rng.normal(0, 0.2, size=(H, F)).astype(np.float32))
    w.add_tensor("output_norm.weight", np.ones(H, np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    if sys.argv[1] == "--tiny-model":
        tiny_model(sys.argv[2])
    else:
        main(sys.argv[1])
