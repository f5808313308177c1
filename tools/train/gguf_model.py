"""The demo model <-> GGUF, with llama.cpp's qwen3moe names and layouts.

Weights are stored as Hugging Face has them: q/k are not permuted (qwen3moe
uses NeoX RoPE, unlike the llama arch). Expert stacks keep the row-major
shape (n_expert, rows, cols), i.e. GGUF ne = [cols, rows, n_expert].
"""

import numpy as np
import torch

import bpe
import gguf
from qwen3moe import Config, Qwen3Moe

ARCH = "qwen3moe"

# (GGUF name, state_dict name); {} is the layer index.
GLOBAL_TENSORS = [("token_embd.weight", "embed.weight"),
                  ("output_norm.weight", "norm.weight"),
                  ("output.weight", "lm_head.weight")]
LAYER_TENSORS = [("blk.{}.attn_norm.weight", "layers.{}.attn_norm.weight"),
                 ("blk.{}.attn_q.weight", "layers.{}.attn.q_proj.weight"),
                 ("blk.{}.attn_k.weight", "layers.{}.attn.k_proj.weight"),
                 ("blk.{}.attn_v.weight", "layers.{}.attn.v_proj.weight"),
                 ("blk.{}.attn_output.weight", "layers.{}.attn.o_proj.weight"),
                 ("blk.{}.attn_q_norm.weight", "layers.{}.attn.q_norm.weight"),
                 ("blk.{}.attn_k_norm.weight", "layers.{}.attn.k_norm.weight"),
                 ("blk.{}.ffn_norm.weight", "layers.{}.ffn_norm.weight"),
                 ("blk.{}.ffn_gate_inp.weight", "layers.{}.moe.gate.weight"),
                 ("blk.{}.ffn_gate_exps.weight", "layers.{}.moe.gate_exps"),
                 ("blk.{}.ffn_up_exps.weight", "layers.{}.moe.up_exps"),
                 ("blk.{}.ffn_down_exps.weight", "layers.{}.moe.down_exps")]


def tensor_names(n_layer):
    names = list(GLOBAL_TENSORS)
    for i in range(n_layer):
        names += [(g.format(i), s.format(i)) for g, s in LAYER_TENSORS]
    return names


def quantized_type(gguf_name, array, qtype):
    """Norms (1-D) and the router stay F32; every other matrix gets qtype."""
    if array.ndim < 2 or gguf_name.endswith("ffn_gate_inp.weight"):
        return gguf.GGML_F32
    return qtype


def write_gguf(model, tok, path, qtype):
    c = model.c
    w = gguf.Writer(alignment=32)
    w.add("general.architecture", gguf.STRING, ARCH)
    w.add("general.name", gguf.STRING, "colibri-demo")
    w.add("general.alignment", gguf.UINT32, 32)
    w.add("general.file_type", gguf.UINT32, 7 if qtype == gguf.GGML_Q8_0 else 0)
    for key, vtype, value in [("block_count", gguf.UINT32, c.n_layer),
                              ("context_length", gguf.UINT32, c.n_ctx),
                              ("embedding_length", gguf.UINT32, c.n_embd),
                              ("feed_forward_length", gguf.UINT32, c.n_ff_exp),
                              ("expert_feed_forward_length", gguf.UINT32, c.n_ff_exp),
                              ("expert_count", gguf.UINT32, c.n_expert),
                              ("expert_used_count", gguf.UINT32, c.n_expert_used),
                              ("attention.head_count", gguf.UINT32, c.n_head),
                              ("attention.head_count_kv", gguf.UINT32, c.n_head_kv),
                              ("attention.key_length", gguf.UINT32, c.head_dim),
                              ("attention.value_length", gguf.UINT32, c.head_dim),
                              ("attention.layer_norm_rms_epsilon", gguf.FLOAT32, c.rms_eps),
                              ("rope.freq_base", gguf.FLOAT32, c.rope_theta)]:
        w.add(f"{ARCH}.{key}", vtype, value)
    w.add("tokenizer.ggml.model", gguf.STRING, "gpt2")
    w.add("tokenizer.ggml.pre", gguf.STRING, "gpt-2")
    w.add_array("tokenizer.ggml.tokens", gguf.STRING, tok.tokens)
    w.add_array("tokenizer.ggml.token_type", gguf.INT32,
                [3 if t == bpe.EOT else 1 for t in tok.tokens])
    w.add_array("tokenizer.ggml.merges", gguf.STRING, [a + " " + b for a, b in tok.merges])
    w.add("tokenizer.ggml.bos_token_id", gguf.UINT32, tok.eot_id)
    w.add("tokenizer.ggml.eos_token_id", gguf.UINT32, tok.eot_id)
    w.add("tokenizer.ggml.add_bos_token", gguf.BOOL, False)
    state = model.state_dict()
    for gname, sname in tensor_names(c.n_layer):
        a = state[sname].detach().to(torch.float32).numpy()
        w.add_tensor(gname, a, quantized_type(gname, a, qtype))
    w.write(path)


def load_gguf(path, dtype=torch.float32):
    """Returns (model, tokenizer, reader) with every tensor dequantized
    exactly to float32 and then cast to dtype."""
    r = gguf.Reader(path)
    kv = r.kv
    if kv["general.architecture"] != ARCH:
        raise ValueError(f"{path}: architecture {kv['general.architecture']!r}, expected {ARCH!r}")
    k = lambda name: kv[f"{ARCH}.{name}"]
    c = Config(n_vocab=len(kv["tokenizer.ggml.tokens"]), n_embd=k("embedding_length"), n_layer=k("block_count"),
               n_head=k("attention.head_count"), n_head_kv=k("attention.head_count_kv"),
               head_dim=k("attention.key_length"), n_expert=k("expert_count"),
               n_expert_used=k("expert_used_count"), n_ff_exp=k("expert_feed_forward_length"),
               n_ctx=k("context_length"), rms_eps=k("attention.layer_norm_rms_epsilon"),
               rope_theta=k("rope.freq_base"))
    model = Qwen3Moe(c)
    state = model.state_dict()
    for gname, sname in tensor_names(c.n_layer):
        a = r.array(gname)
        if tuple(a.shape) != tuple(state[sname].shape):
            raise ValueError(f"tensor {gname}: shape {a.shape}, expected {tuple(state[sname].shape)}")
        state[sname] = torch.from_numpy(np.ascontiguousarray(a))
    model.load_state_dict(state)
    model = model.to(dtype).eval()
    tok = bpe.Tokenizer(kv["tokenizer.ggml.tokens"], [m.split(" ") for m in kv["tokenizer.ggml.merges"]])
    return model, tok, r
