"""PyTorch reference of the qwen3moe architecture (Hugging Face's
Qwen3MoeForCausalLM), written for clarity rather than speed.

Per layer: x += attn(rms_norm(x)); x += moe(rms_norm(x)).
Attention: q/k/v projections without bias, RMSNorm over head_dim on q and k
before RoPE, NeoX-style RoPE (rotate_half), grouped-query attention, causal
softmax, output projection. MoE: router softmax over all experts, top-k,
renormalised k weights (norm_topk_prob), SwiGLU experts, weighted sum.
"""

import dataclasses
import math

import torch
import torch.nn.functional as F
from torch import nn


@dataclasses.dataclass
class Config:
    n_vocab: int = 4096
    n_embd: int = 256
    n_layer: int = 4
    n_head: int = 4
    n_head_kv: int = 2
    head_dim: int = 64
    n_expert: int = 8
    n_expert_used: int = 2
    n_ff_exp: int = 384
    n_ctx: int = 256
    rms_eps: float = 1e-6
    rope_theta: float = 10000.0


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))  # (dim)

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope_cos_sin(positions, head_dim, theta, dtype):
    """cos/sin of shape (T, head_dim): frequency i pairs dimension i with
    dimension i + head_dim/2 (NeoX layout)."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
    freqs = positions.to(torch.float64)[:, None] * inv_freq[None, :]
    emb = torch.cat([freqs, freqs], dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


def apply_rope(x, cos, sin):
    # x: (B, H, T, head_dim); cos/sin: (T, head_dim)
    return x * cos + rotate_half(x) * sin


class Attention(nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        self.c = c
        self.q_proj = nn.Linear(c.n_embd, c.n_head * c.head_dim, bias=False)     # (n_head*head_dim, n_embd)
        self.k_proj = nn.Linear(c.n_embd, c.n_head_kv * c.head_dim, bias=False)  # (n_head_kv*head_dim, n_embd)
        self.v_proj = nn.Linear(c.n_embd, c.n_head_kv * c.head_dim, bias=False)  # (n_head_kv*head_dim, n_embd)
        self.o_proj = nn.Linear(c.n_head * c.head_dim, c.n_embd, bias=False)     # (n_embd, n_head*head_dim)
        self.q_norm = RMSNorm(c.head_dim, c.rms_eps)
        self.k_norm = RMSNorm(c.head_dim, c.rms_eps)

    def forward(self, x, cos, sin):
        c = self.c
        B, T, _ = x.shape
        q = self.q_norm(self.q_proj(x).view(B, T, c.n_head, c.head_dim)).transpose(1, 2)
        k = self.k_norm(self.k_proj(x).view(B, T, c.n_head_kv, c.head_dim)).transpose(1, 2)
        v = self.v_proj(x).view(B, T, c.n_head_kv, c.head_dim).transpose(1, 2)
        q = apply_rope(q, cos, sin)
        k = apply_rope(k, cos, sin)
        group = c.n_head // c.n_head_kv
        k = k.repeat_interleave(group, dim=1)  # query head h reads kv head h // group
        v = v.repeat_interleave(group, dim=1)
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(c.head_dim)
        mask = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)
        scores = scores.masked_fill(mask, float("-inf"))
        out = torch.softmax(scores, dim=-1) @ v  # (B, n_head, T, head_dim)
        return self.o_proj(out.transpose(1, 2).reshape(B, T, c.n_head * c.head_dim))


class MoE(nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        self.c = c
        self.gate = nn.Linear(c.n_embd, c.n_expert, bias=False)  # router, (n_expert, n_embd)
        s = 1.0 / math.sqrt(c.n_embd)
        self.gate_exps = nn.Parameter(torch.randn(c.n_expert, c.n_ff_exp, c.n_embd) * s)  # (n_expert, n_ff_exp, n_embd)
        self.up_exps = nn.Parameter(torch.randn(c.n_expert, c.n_ff_exp, c.n_embd) * s)    # (n_expert, n_ff_exp, n_embd)
        self.down_exps = nn.Parameter(torch.randn(c.n_expert, c.n_embd, c.n_ff_exp)
                                      / math.sqrt(c.n_ff_exp))                            # (n_expert, n_embd, n_ff_exp)

    def route(self, x):
        """x: (N, n_embd) -> probs (N, n_expert), top-k ids (N, k), renormalised weights (N, k)."""
        probs = torch.softmax(self.gate(x), dim=-1)
        weights, ids = torch.topk(probs, self.c.n_expert_used, dim=-1)
        weights = weights / weights.sum(-1, keepdim=True)
        return probs, ids, weights

    def forward(self, x):
        B, T, D = x.shape
        flat = x.reshape(B * T, D)
        probs, ids, weights = self.route(flat)
        out = torch.zeros_like(flat)
        for e in range(self.c.n_expert):
            tok, slot = (ids == e).nonzero(as_tuple=True)
            if tok.numel() == 0:
                continue
            h = flat[tok]
            y = F.silu(h @ self.gate_exps[e].t()) * (h @ self.up_exps[e].t())
            y = y @ self.down_exps[e].t()
            out.index_add_(0, tok, y * weights[tok, slot, None])
        return out.view(B, T, D), probs, ids


class Block(nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        self.attn_norm = RMSNorm(c.n_embd, c.rms_eps)
        self.attn = Attention(c)
        self.ffn_norm = RMSNorm(c.n_embd, c.rms_eps)
        self.moe = MoE(c)

    def forward(self, x, cos, sin):
        x = x + self.attn(self.attn_norm(x), cos, sin)
        y, probs, ids = self.moe(self.ffn_norm(x))
        return x + y, probs, ids


class Qwen3Moe(nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        self.c = c
        self.embed = nn.Embedding(c.n_vocab, c.n_embd)  # (n_vocab, n_embd)
        self.layers = nn.ModuleList(Block(c) for _ in range(c.n_layer))
        self.norm = RMSNorm(c.n_embd, c.rms_eps)
        self.lm_head = nn.Linear(c.n_embd, c.n_vocab, bias=False)  # (n_vocab, n_embd), untied

    def forward(self, tokens, collect=False):
        """tokens: (B, T) -> logits (B, T, n_vocab), plus per-layer router
        probs and top-k ids. With collect, also the residual stream after
        every layer (hiddens[L] is the input of layer L+1)."""
        B, T = tokens.shape
        cos, sin = rope_cos_sin(torch.arange(T), self.c.head_dim, self.c.rope_theta, self.embed.weight.dtype)
        x = self.embed(tokens)
        all_probs, all_ids, hiddens = [], [], []
        for layer in self.layers:
            x, probs, ids = layer(x, cos, sin)
            all_probs.append(probs)
            all_ids.append(ids)
            if collect:
                hiddens.append(x)
        logits = self.lm_head(self.norm(x))
        if collect:
            return logits, all_probs, all_ids, hiddens
        return logits, all_probs, all_ids


def load_balancing_loss(all_probs, all_ids, n_expert):
    """Switch-style auxiliary loss as in HF's load_balancing_loss_func:
    n_expert * sum_e (fraction of top-k slots sent to e) * (mean prob of e),
    averaged over layers. Equals 1 when routing is uniform."""
    total = 0.0
    for probs, ids in zip(all_probs, all_ids):
        k = ids.shape[-1]
        frac = F.one_hot(ids, n_expert).float().sum(1).mean(0) / k  # (n_expert)
        total = total + n_expert * (frac * probs.mean(0)).sum()
    return total / len(all_probs)


def count_params(model):
    return sum(p.numel() for p in model.parameters())


def active_params(c: Config):
    attn = c.n_embd * c.head_dim * (2 * c.n_head + 2 * c.n_head_kv) + 2 * c.head_dim + 2 * c.n_embd
    moe_active = c.n_embd * c.n_expert + c.n_expert_used * 3 * c.n_embd * c.n_ff_exp
    return c.n_layer * (attn + moe_active) + 2 * c.n_vocab * c.n_embd + c.n_embd
