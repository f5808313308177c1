"""Exports a trained checkpoint:
  models/colibri-demo-q8_0.gguf         Q8_0 matrices, F32 norms and router
  tools/train/out/colibri-demo-f32.gguf all F32 (not committed)
  tools/train/out/hf/                   config.json, model.safetensors, tokenizer.json (not committed)

    /usr/bin/python3 tools/train/export.py [--ckpt tools/train/out/final.pt]
"""

import argparse
import json
import os
import struct

import numpy as np
import torch

import bpe
import gguf
from gguf_model import write_gguf
from qwen3moe import Config, Qwen3Moe

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))


def load_checkpoint(path):
    state = torch.load(path, map_location="cpu")
    model = Qwen3Moe(Config(**state["config"]))
    model.load_state_dict(state["model"])
    return model.eval(), state


def write_safetensors(path, tensors):
    """safetensors: u64 little-endian header length, JSON header naming each
    tensor's dtype, shape and [begin, end) byte range, then the raw data."""
    header = {"__metadata__": {"format": "pt"}}
    blobs = []
    offset = 0
    for name, a in tensors:
        data = np.ascontiguousarray(a, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    h = json.dumps(header, separators=(",", ":")).encode("utf-8")
    h += b" " * ((-len(h)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for b in blobs:
            f.write(b)


def hf_tensors(model):
    """Hugging Face Qwen3MoeForCausalLM names; experts split per expert."""
    s = {k: v.detach().to(torch.float32).numpy() for k, v in model.state_dict().items()}
    out = [("model.embed_tokens.weight", s["embed.weight"])]
    for i in range(model.c.n_layer):
        p, q = f"model.layers.{i}.", f"layers.{i}."
        out += [(p + "input_layernorm.weight", s[q + "attn_norm.weight"]),
                (p + "self_attn.q_proj.weight", s[q + "attn.q_proj.weight"]),
                (p + "self_attn.k_proj.weight", s[q + "attn.k_proj.weight"]),
                (p + "self_attn.v_proj.weight", s[q + "attn.v_proj.weight"]),
                (p + "self_attn.o_proj.weight", s[q + "attn.o_proj.weight"]),
                (p + "self_attn.q_norm.weight", s[q + "attn.q_norm.weight"]),
                (p + "self_attn.k_norm.weight", s[q + "attn.k_norm.weight"]),
                (p + "post_attention_layernorm.weight", s[q + "ffn_norm.weight"]),
                (p + "mlp.gate.weight", s[q + "moe.gate.weight"])]
        for e in range(model.c.n_expert):
            out += [(p + f"mlp.experts.{e}.gate_proj.weight", s[q + "moe.gate_exps"][e]),
                    (p + f"mlp.experts.{e}.up_proj.weight", s[q + "moe.up_exps"][e]),
                    (p + f"mlp.experts.{e}.down_proj.weight", s[q + "moe.down_exps"][e])]
    out += [("model.norm.weight", s["norm.weight"]), ("lm_head.weight", s["lm_head.weight"])]
    return out


def hf_config(c, tok, aux_coef):
    return {"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe",
            "vocab_size": c.n_vocab, "hidden_size": c.n_embd, "intermediate_size": c.n_ff_exp,
            "moe_intermediate_size": c.n_ff_exp, "num_hidden_layers": c.n_layer,
            "num_attention_heads": c.n_head, "num_key_value_heads": c.n_head_kv, "head_dim": c.head_dim,
            "num_experts": c.n_expert, "num_experts_per_tok": c.n_expert_used, "norm_topk_prob": True,
            "decoder_sparse_step": 1, "mlp_only_layers": [], "max_position_embeddings": c.n_ctx,
            "rms_norm_eps": c.rms_eps, "rope_theta": c.rope_theta, "rope_scaling": None,
            "hidden_act": "silu", "attention_bias": False, "attention_dropout": 0.0,
            "tie_word_embeddings": False, "use_sliding_window": False, "sliding_window": None,
            "max_window_layers": c.n_layer, "output_router_logits": False,
            "router_aux_loss_coef": aux_coef, "initializer_range": 0.02, "use_cache": True,
            "bos_token_id": tok.eot_id, "eos_token_id": tok.eot_id, "torch_dtype": "float32"}


def hf_tokenizer(tok):
    return {"version": "1.0", "truncation": None, "padding": None,
            "added_tokens": [{"id": tok.eot_id, "content": bpe.EOT, "single_word": False, "lstrip": False,
                              "rstrip": False, "normalized": False, "special": True}],
            "normalizer": None,
            "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                              "use_regex": True},
            "post_processor": None,
            "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
            "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                      "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                      "ignore_merges": False,
                      "vocab": {t: i for i, t in enumerate(tok.tokens)},
                      "merges": [a + " " + b for a, b in tok.merges]}}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", default=os.path.join(HERE, "out", "final.pt"))
    ap.add_argument("--tokenizer", default=os.path.join(HERE, "out", "tokenizer.json"))
    ap.add_argument("--gguf", default=os.path.join(ROOT, "models", "colibri-demo-q8_0.gguf"))
    ap.add_argument("--out", default=os.path.join(HERE, "out"))
    args = ap.parse_args()

    model, state = load_checkpoint(args.ckpt)
    tok = bpe.Tokenizer.load(args.tokenizer)
    os.makedirs(os.path.dirname(args.gguf), exist_ok=True)
    write_gguf(model, tok, args.gguf, gguf.GGML_Q8_0)
    print(f"wrote {args.gguf} ({os.path.getsize(args.gguf)} bytes)")
    f32 = os.path.join(args.out, "colibri-demo-f32.gguf")
    write_gguf(model, tok, f32, gguf.GGML_F32)
    print(f"wrote {f32} ({os.path.getsize(f32)} bytes)")

    hf = os.path.join(args.out, "hf")
    os.makedirs(hf, exist_ok=True)
    write_safetensors(os.path.join(hf, "model.safetensors"), hf_tensors(model))
    with open(os.path.join(hf, "config.json"), "w") as f:
        json.dump(hf_config(model.c, tok, state["args"]["aux_coef"]), f, indent=2)
    with open(os.path.join(hf, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(hf_tokenizer(tok), f, ensure_ascii=False)
    with open(os.path.join(hf, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": None, "eos_token": bpe.EOT,
                   "add_bos_token": False, "model_max_length": model.c.n_ctx}, f, indent=2)
    print(f"wrote {hf}/")


if __name__ == "__main__":
    main()
