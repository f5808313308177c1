"""Writes tests/data/demo_reference.json: what the PyTorch reference computes
on the committed demo GGUF, as an oracle for the C++ engine.

The GGUF is parsed by our own reader, every tensor is dequantized exactly to
float32 (Q8_0: int8 * fp16 scale), then the forward runs in float64. The
engine's float32 path should match within ~1e-4 relative on the logits;
greedy tokens and expert choices should match wherever the recorded margins
are not near zero.

    /usr/bin/python3 tools/train/dump_reference.py
"""

import argparse
import hashlib
import json
import os

import torch

from gguf_model import load_gguf

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))

PROMPTS = ["It was a", "The prince said", "\"Well, Prince,", "In 1812 the French army"]
N_GENERATE = 16
TOP_POSITION = 64
TOP_GREEDY = 8


def g(x):
    """Nine significant digits: far below the float32 tolerance, keeps the file small."""
    return float(f"{float(x):.9g}")


def greedy(model, ids, n):
    """Teacher-forced greedy decoding: full forward each step, argmax fed back."""
    steps = []
    ids = list(ids)
    for _ in range(n):
        logits, _, _ = model(torch.tensor([ids]))
        last = logits[0, -1]
        top = last.topk(TOP_GREEDY)
        steps.append({"id": int(top.indices[0]),
                      "top_ids": [int(i) for i in top.indices],
                      "top_logits": [g(v) for v in top.values],
                      "margin": g(top.values[0] - top.values[1])})
        ids.append(int(top.indices[0]))
    return steps


def describe(model, tok, text):
    prompt_ids = tok.encode(text)
    steps = greedy(model, prompt_ids, N_GENERATE)
    gen_ids = [s["id"] for s in steps]
    all_ids = prompt_ids + gen_ids
    with torch.no_grad():
        logits, probs, _ = model(torch.tensor([all_ids]))
    k = model.c.n_expert_used
    positions = []
    for t in range(len(all_ids)):
        lt = logits[0, t]
        top = lt.topk(TOP_POSITION)
        experts, weights, gaps = [], [], []
        for p in probs:
            sp = p[t].sort(descending=True)
            w = sp.values[:k] / sp.values[:k].sum()
            experts.append([int(i) for i in sp.indices[:k]])
            weights.append([g(v) for v in w])
            gaps.append(g(sp.values[k - 1] - sp.values[k]))
        positions.append({"top_ids": [int(i) for i in top.indices], "top_logits": [g(v) for v in top.values],
                          "logsumexp": g(torch.logsumexp(lt, 0)),
                          "experts": experts, "expert_weights": weights, "router_gap": gaps})
    last_prompt = len(prompt_ids) - 1
    return {"text": text, "prompt_ids": prompt_ids, "generated_ids": gen_ids,
            "generated_text": tok.decode(gen_ids), "greedy": steps,
            "logits_last_prompt_position": [g(v) for v in logits[0, last_prompt]],
            "positions": positions}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gguf", default=os.path.join(ROOT, "models", "colibri-demo-q8_0.gguf"))
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "data", "demo_reference.json"))
    args = ap.parse_args()
    torch.set_num_threads(2)
    model, tok, _ = load_gguf(args.gguf, dtype=torch.float64)
    with open(args.gguf, "rb") as f:
        sha = hashlib.sha256(f.read()).hexdigest()
    c = model.c
    with torch.no_grad():
        prompts = [describe(model, tok, p) for p in PROMPTS]
    doc = {
        "model": "models/colibri-demo-q8_0.gguf",
        "model_sha256": sha,
        "reference": "tools/train/qwen3moe.py in float64 on the GGUF's tensors dequantized exactly to float32",
        "tolerance": {
            "logits": "float32 engine: |a - b| <= 1e-4 * max(1, |b|) expected; 1e-3 is a safe bound",
            "greedy": "ids must match where margin (top1 - top2 logit) > 1e-3",
            "experts": "top-k sets must match where router_gap (k-th minus (k+1)-th prob) > 1e-4",
        },
        "config": {"n_vocab": c.n_vocab, "n_embd": c.n_embd, "n_layer": c.n_layer, "n_head": c.n_head,
                   "n_head_kv": c.n_head_kv, "head_dim": c.head_dim, "n_expert": c.n_expert,
                   "n_expert_used": c.n_expert_used, "n_ff_exp": c.n_ff_exp, "n_ctx": c.n_ctx},
        "fields": {
            "prompt_ids": "tokenized with tools/train/bpe.py using the GGUF's tokens and merges, no BOS",
            "greedy": f"{N_GENERATE} steps: argmax id, top-{TOP_GREEDY} ids and logits, margin",
            "positions": f"for every position of prompt + generated: top-{TOP_POSITION} logits, logsumexp, "
                         "per layer the top-k experts (by probability) with renormalised weights and router_gap",
            "logits_last_prompt_position": "all n_vocab logits after the last prompt token",
        },
        "prompts": prompts,
    }
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    for p in prompts:
        print(f"{p['text']!r} -> {p['generated_text']!r}")
    print(f"wrote {args.out} ({os.path.getsize(args.out)} bytes)")


if __name__ == "__main__":
    main()
