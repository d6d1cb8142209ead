#!/usr/bin/env python3
"""Writes a Llama-family Hugging Face directory (F32 safetensors + sentencepiece tokenizer.model, e.g.
../shared/models/stories260K, or a `lookahead save-model` directory of a random: preset) as a GGUF file the way
llama.cpp's converter does (tests/scripts/test_gguf.sh):

* the architecture (llama, qwen2, qwen3, phi3, gemma2, gemma3) with its hyper-parameters; llama's q_proj/k_proj rows
  permuted for ggml's adjacent-pair RoPE, Gemma's norm weights stored as 1 + w;
* the tokenizer as tokenizer.ggml.* (model "llama": pieces, scores, token types read from tokenizer.model);
* 2-D weights in TYPE (f32, f16, q8_0, q4_0, q4_1, q5_0, q5_1, with the `gguf` package's numpy quantizers; a weight
  whose rows are not whole blocks stays F32, as llama.cpp's quantizer falls back), 1-D weights F32.

With --ref-dir DIR it also writes DIR, a Hugging Face copy of the model whose weights are the GGUF's dequantized
by numpy (gguf.quants.dequantize): the reference the engine's own dequantization must reproduce exactly.

  gguf_write.py HF_DIR OUT.gguf TYPE [--ref-dir DIR]
"""
import argparse
import json
import os
import shutil
import struct

import numpy as np
import gguf
from gguf import GGMLQuantizationType as Q
from safetensors.numpy import load_file, save_file


def varint(b, i):
    v = s = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << s
        s += 7
        if c < 0x80:
            return v, i


def fields(b):
    """(field, wire type, value) of one protobuf message: enough to read a sentencepiece ModelProto."""
    i = 0
    while i < len(b):
        key, i = varint(b, i)
        f, w = key >> 3, key & 7
        if w == 0:
            v, i = varint(b, i)
        elif w == 1:
            v, i = b[i:i + 8], i + 8
        elif w == 2:
            n, i = varint(b, i)
            v, i = b[i:i + n], i + n
        elif w == 5:
            v, i = b[i:i + 4], i + 4
        else:
            raise ValueError(f"wire type {w}")
        yield f, w, v


def read_sentencepiece(path):
    pieces, scores, types = [], [], []
    add_dummy_prefix, remove_extra = True, True
    for f, _, v in fields(open(path, "rb").read()):
        if f == 1:
            p, s, t = "", 0.0, 1
            for g, _, x in fields(v):
                if g == 1:
                    p = x.decode("utf-8")
                elif g == 2:
                    s = struct.unpack("<f", x)[0]
                elif g == 3:
                    t = x
            pieces.append(p)
            scores.append(s)
            types.append(t)
        elif f == 3:
            for g, _, x in fields(v):
                if g == 3:
                    add_dummy_prefix = bool(x)
                elif g == 4:
                    remove_extra = bool(x)
    return pieces, scores, types, add_dummy_prefix, remove_extra


def permute(w, n_head):
    """llama.cpp's LlamaModel.permute: rows of each head reordered from halves to adjacent pairs."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


ARCHS = {"LlamaForCausalLM": "llama", "Qwen2ForCausalLM": "qwen2", "Qwen3ForCausalLM": "qwen3",
         "Phi3ForCausalLM": "phi3", "Gemma2ForCausalLM": "gemma2", "Gemma3ForCausalLM": "gemma3"}
QTYPES = {"f32": Q.F32, "f16": Q.F16, "q8_0": Q.Q8_0, "q4_0": Q.Q4_0, "q4_1": Q.Q4_1, "q5_0": Q.Q5_0, "q5_1": Q.Q5_1}
FILE_TYPE = {"f32": 0, "f16": 1, "q4_0": 2, "q4_1": 3, "q8_0": 7, "q5_0": 8, "q5_1": 9}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("hf_dir")
    ap.add_argument("out")
    ap.add_argument("type", choices=sorted(QTYPES))
    ap.add_argument("--ref-dir")
    a = ap.parse_args()
    cfg = json.load(open(os.path.join(a.hf_dir, "config.json")))
    hf_arch = cfg.get("architectures", ["LlamaForCausalLM"])[0]
    arch = ARCHS[hf_arch]
    gemma = arch in ("gemma2", "gemma3")
    gen_path = os.path.join(a.hf_dir, "generation_config.json")
    gen = json.load(open(gen_path)) if os.path.exists(gen_path) else {}
    tok_cfg_path = os.path.join(a.hf_dir, "tokenizer_config.json")
    tok_cfg = json.load(open(tok_cfg_path)) if os.path.exists(tok_cfg_path) else {}
    H, L = cfg["hidden_size"], cfg["num_hidden_layers"]
    nh = cfg["num_attention_heads"]
    nkv = cfg.get("num_key_value_heads", nh)
    qt = QTYPES[a.type]

    w = gguf.GGUFWriter(a.out, arch)
    w.add_name(os.path.basename(os.path.normpath(a.hf_dir)))
    w.add_context_length(cfg.get("max_position_embeddings", 2048))
    w.add_embedding_length(H)
    w.add_block_count(L)
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(nh)
    w.add_head_count_kv(nkv)
    hd = cfg.get("head_dim", H // nh)
    w.add_key_length(hd)
    w.add_value_length(hd)
    w.add_rope_dimension_count(int(hd * cfg.get("partial_rotary_factor", 1.0)))
    w.add_rope_freq_base(cfg.get("rope_theta", 10000.0))
    w.add_layer_norm_rms_eps(cfg.get("rms_norm_eps", 1e-5))
    w.add_file_type(FILE_TYPE[a.type])
    rs = cfg.get("rope_scaling") or {}
    if rs.get("rope_type", rs.get("type")) == "linear":
        w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        w.add_rope_scaling_factor(rs["factor"])
    if cfg.get("sliding_window"):
        w.add_sliding_window(cfg["sliding_window"])
        if "layer_types" in cfg and arch == "gemma3":  # the layers that slide, when not llama.cpp's fixed 5:1
            w.add_key_value(f"{arch}.attention.sliding_window_pattern",
                            [t == "sliding_attention" for t in cfg["layer_types"]], gguf.GGUFValueType.ARRAY,
                            gguf.GGUFValueType.BOOL)
    if arch == "gemma2":
        w.add_attn_logit_softcapping(cfg.get("attn_logit_softcapping") or 50.0)
        w.add_final_logit_softcapping(cfg.get("final_logit_softcapping") or 30.0)
    if not os.path.exists(os.path.join(a.hf_dir, "tokenizer.model")):  # random: models (byte tokenizer)
        return write_tensors(w, a, cfg, arch, gemma, nh, nkv, qt)
    pieces, scores, types, dummy, extra = read_sentencepiece(os.path.join(a.hf_dir, "tokenizer.model"))
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list(pieces)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_add_space_prefix(dummy)
    w.add_remove_extra_whitespaces(extra)
    w.add_bos_token_id(cfg.get("bos_token_id", 1))
    eos = gen.get("eos_token_id", cfg.get("eos_token_id", 2))
    eos = eos if isinstance(eos, list) else [eos]
    w.add_eos_token_id(eos[-1])
    if len(eos) > 1:
        w.add_eot_token_id(eos[0])
    w.add_unk_token_id(types.index(2) if 2 in types else 0)
    w.add_add_bos_token(bool(tok_cfg.get("add_bos_token", True)))
    write_tensors(w, a, cfg, arch, gemma, nh, nkv, qt)


def write_tensors(w, a, cfg, arch, gemma, nh, nkv, qt):
    W = load_file(os.path.join(a.hf_dir, "model.safetensors"))
    ref = {}
    names = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
             "lm_head.weight": "output.weight"}
    per_layer = {"input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
                 "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output", "self_attn.qkv_proj": "attn_qkv",
                 "self_attn.q_norm": "attn_q_norm", "self_attn.k_norm": "attn_k_norm",
                 "post_attention_layernorm": "post_attention_norm" if gemma else "ffn_norm",
                 "pre_feedforward_layernorm": "ffn_norm", "post_feedforward_layernorm": "post_ffw_norm",
                 "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.gate_up_proj": "ffn_up",
                 "mlp.down_proj": "ffn_down"}
    for n, t in W.items():
        t = t.astype(np.float32)
        if n in names:
            g = names[n]
        else:
            parts = n.split(".")  # model.layers.N.<a>.<b>.weight
            g = f"blk.{parts[2]}.{per_layer['.'.join(parts[3:-1])]}.{parts[-1]}"
        data = t
        if arch == "llama" and (g.endswith("attn_q.weight") or g.endswith("attn_q.bias")):
            data = permute(t, nh)
        elif arch == "llama" and (g.endswith("attn_k.weight") or g.endswith("attn_k.bias")):
            data = permute(t, nkv)
        elif gemma and g.endswith("norm.weight"):
            data = t + np.float32(1.0)  # llama.cpp's Gemma converter stores 1 + w
            ref[n] = data - np.float32(1.0)
        block = gguf.constants.GGML_QUANT_SIZES[qt][0]
        if t.ndim == 2 and qt != Q.F32 and t.shape[1] % block == 0:
            q = gguf.quants.quantize(data, qt)
            w.add_tensor(g, q, raw_dtype=qt)
            # quantization works on rows (blocks along a row), so it commutes with the row permutation
            ref[n] = gguf.quants.dequantize(gguf.quants.quantize(t, qt), qt).astype(np.float32)
        else:
            w.add_tensor(g, data)
            ref.setdefault(n, t)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()

    if a.ref_dir:
        os.makedirs(a.ref_dir, exist_ok=True)
        for f in os.listdir(a.hf_dir):
            if f != "model.safetensors" and os.path.isfile(os.path.join(a.hf_dir, f)):
                shutil.copy(os.path.join(a.hf_dir, f), a.ref_dir)
        save_file({k: np.ascontiguousarray(v) for k, v in ref.items()}, os.path.join(a.ref_dir, "model.safetensors"))


if __name__ == "__main__":
    main()
