#!/usr/bin/env python3
"""Writes tests/core/data/gguf_fixture.gguf, the reader's known-answer file (tests/core/test_gguf.cpp):

* one metadata key of every GGUF value type, arrays of several element types and an array of arrays;
* for each block type the engine dequantizes, a tensor "q.<TYPE>" of random blocks (2 rows) and "expect.<TYPE>",
  the same values dequantized by the `gguf` package's numpy code (gguf.quants.dequantize, which transformers uses
  when it loads a GGUF), so the C++ dequantizer is checked bit for bit against an independent implementation.

Run with the venv python of launch/setup.sh (it has gguf 0.19):
  ~/.cache/lookahead/torch-2.11.0/bin/python tests/core/data/make_gguf_fixture.py tests/core/data/gguf_fixture.gguf
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


if __name__ == "__main__":
    main(sys.argv[1])
