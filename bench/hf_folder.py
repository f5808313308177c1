#!/usr/bin/env python3
"""A Hugging Face model folder of random BF16 weights, to measure `colibri convert`.

Writes config.json (Qwen3-30B-A3B's, cut to --layers), model-0000N-of-0000M.safetensors
shards with model.safetensors.index.json, and the given tokenizer.json, with the tensor
names and shapes transformers' Qwen3MoeForCausalLM saves. The embedding and output have
the tokenizer's vocabulary size.

  /usr/bin/python3 bench/hf_folder.py --layers 4 \
      --tokenizer ../shared/data/tokenizers/olmoe/allenai_gpt-neox-olmo-dolma-v1_5.json -o /tmp/qwen3-4l
  build/colibri convert /tmp/qwen3-4l -o /tmp/qwen3-4l.gguf --type q8_0
"""
import argparse
import json
import os
import shutil
import struct

import numpy as np

p = argparse.ArgumentParser()
p.add_argument("--layers", type=int, default=4)
p.add_argument("--tokenizer", required=True)
p.add_argument("--shard-gb", type=float, default=2.0)
p.add_argument("-o", "--out", required=True)
a = p.parse_args()

tok = json.load(open(a.tokenizer))
vocab = max(max(tok["model"]["vocab"].values()), max((t["id"] for t in tok.get("added_tokens", [])), default=0)) + 1
H, E, F, FF, HEADS, KV, D = 2048, 128, 768, 6144, 32, 4, 128
config = {
    "architectures": ["Qwen3MoeForCausalLM"], "hidden_act": "silu", "hidden_size": H, "head_dim": D,
    "intermediate_size": FF, "max_position_embeddings": 40960, "moe_intermediate_size": F,
    "norm_topk_prob": True, "num_attention_heads": HEADS, "num_experts": E, "num_experts_per_tok": 8,
    "num_hidden_layers": a.layers, "num_key_value_heads": KV, "rms_norm_eps": 1e-6, "rope_theta": 1e6,
    "rope_scaling": None, "decoder_sparse_step": 1, "mlp_only_layers": [], "use_sliding_window": False,
    "tie_word_embeddings": False, "torch_dtype": "bfloat16", "vocab_size": vocab,
}

tensors = [("model.embed_tokens.weight", (vocab, H)), ("model.norm.weight", (H,)), ("lm_head.weight", (vocab, H))]
for l in range(a.layers):
    q = f"model.layers.{l}."
    tensors += [(q + "input_layernorm.weight", (H,)), (q + "post_attention_layernorm.weight", (H,)),
                (q + "self_attn.q_proj.weight", (HEADS * D, H)), (q + "self_attn.k_proj.weight", (KV * D, H)),
                (q + "self_attn.v_proj.weight", (KV * D, H)), (q + "self_attn.o_proj.weight", (H, HEADS * D)),
                (q + "self_attn.q_norm.weight", (D,)), (q + "self_attn.k_norm.weight", (D,)),
                (q + "mlp.gate.weight", (E, H))]
    for e in range(E):
        tensors += [(q + f"mlp.experts.{e}.gate_proj.weight", (F, H)), (q + f"mlp.experts.{e}.up_proj.weight", (F, H)),
                    (q + f"mlp.experts.{e}.down_proj.weight", (H, F))]

rng = np.random.default_rng(1)
os.makedirs(a.out, exist_ok=True)
shards, cur, size = [], [], 0
for name, shape in tensors:
    n = int(np.prod(shape)) * 2
    if cur and size + n > a.shard_gb * 1e9:
        shards.append(cur)
        cur, size = [], 0
    cur.append((name, shape))
    size += n
shards.append(cur)

weight_map = {}
for i, shard in enumerate(shards):
    fname = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
    header, off = {}, 0
    for name, shape in shard:
        n = int(np.prod(shape)) * 2
        header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [off, off + n]}
        off += n
        weight_map[name] = fname
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(os.path.join(a.out, fname), "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for name, shape in shard:
            x = (rng.standard_normal(int(np.prod(shape)), dtype=np.float32) * 0.02)
            if len(shape) == 1:
                x = x + 1.0
            f.write((x.view(np.uint32) >> 16).astype(np.uint16).tobytes())
json.dump({"metadata": {}, "weight_map": weight_map}, open(os.path.join(a.out, "model.safetensors.index.json"), "w"))
json.dump(config, open(os.path.join(a.out, "config.json"), "w"), indent=2)
shutil.copy(a.tokenizer, os.path.join(a.out, "tokenizer.json"))
print(f"{a.out}: {a.layers} layers, {len(tensors)} tensors, {len(shards)} shards, vocab {vocab}")
