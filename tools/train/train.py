"""Trains the colibri demo model: a small qwen3moe on War and Peace.

    OMP_WAIT_POLICY=PASSIVE nice -n 10 /usr/bin/python3 tools/train/train.py

Writes tools/train/out/tokenizer.json, out/ckpt.pt (latest), out/final.pt and
prints the train / held-out loss curve. Everything is seeded: the same data,
step count and thread count give the same weights.
"""

import argparse
import math
import os
import time

import torch
import torch.nn.functional as F

import bpe
from gguf_model import load_gguf
from qwen3moe import Config, Qwen3Moe, count_params, active_params, load_balancing_loss

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_TEXT = os.path.join(HERE, "..", "..", "..", "shared", "data", "text", "war-and-peace.txt")
HOLDOUT_FRACTION = 0.05


def split_text(text):
    """Last ~5% of the book (cut at a line start) is held out."""
    cut = text.index("\n", int(len(text) * (1 - HOLDOUT_FRACTION))) + 1
    return text[:cut], text[cut:]


def init_weights(model, std=0.02):
    """HF's Qwen3Moe init: normal(0, std) for every matrix, ones for norms."""
    for name, p in model.named_parameters():
        if p.dim() >= 2:
            torch.nn.init.normal_(p, 0.0, std)


def lr_at(step, steps, lr, warmup):
    if step < warmup:
        return lr * (step + 1) / warmup
    t = (step - warmup) / max(1, steps - warmup)
    return lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * t)))


def batch_at(data, gen, batch, n_ctx):
    starts = torch.randint(0, len(data) - n_ctx - 1, (batch,), generator=gen)
    x = torch.stack([data[s:s + n_ctx + 1] for s in starts.tolist()])
    return x[:, :-1], x[:, 1:]


@torch.no_grad()
def evaluate(model, data, n_ctx, n_windows=24):
    """Mean next-token loss over fixed, evenly spaced held-out windows."""
    model.eval()
    step = (len(data) - n_ctx - 1) // n_windows
    x = torch.stack([data[i * step:i * step + n_ctx + 1] for i in range(n_windows)])
    logits, _, _ = model(x[:, :-1])
    model.train()
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1)).item()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--text", default=DEFAULT_TEXT)
    ap.add_argument("--out", default=os.path.join(HERE, "out"))
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--aux-coef", type=float, default=0.01)
    ap.add_argument("--eval-every", type=int, default=25)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--init-gguf", help="start from the weights and tokenizer of this GGUF (dequantized) "
                    "instead of a random init: trains an existing demo model further")
    ap.add_argument("--max-minutes", type=float, default=0,
                    help="stop (after an evaluation) once this much wall time has passed; 0: no limit")
    ap.add_argument("--tokenizer", help="reuse a tokenizer.json written by an earlier run of the same text "
                    "(BPE training is deterministic, this only saves its minute)")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    os.makedirs(args.out, exist_ok=True)

    with open(args.text, encoding="utf-8") as f:
        train_text, held_text = split_text(f.read())
    t0 = time.time()
    init = None
    if args.init_gguf:
        init, tok, _ = load_gguf(args.init_gguf)
        tokens, merges = tok.tokens, tok.merges
    elif args.tokenizer:
        tok = bpe.Tokenizer.load(args.tokenizer)
        tokens, merges = tok.tokens, tok.merges
    else:
        tokens, merges = bpe.train(train_text, 4096)
        tok = bpe.Tokenizer(tokens, merges)
    tok.save(os.path.join(args.out, "tokenizer.json"))
    train_ids = torch.tensor(tok.encode(train_text), dtype=torch.long)
    held_ids = torch.tensor(tok.encode(held_text), dtype=torch.long)
    print(f"bpe: {len(tokens)} tokens, {len(merges)} merges, {time.time() - t0:.1f}s; "
          f"train {len(train_ids)} tokens, held-out {len(held_ids)} tokens", flush=True)

    c = Config(n_vocab=len(tokens), n_embd=256, n_layer=4, n_head=4, n_head_kv=2, head_dim=64,
               n_expert=8, n_expert_used=2, n_ff_exp=256, n_ctx=256)
    model = Qwen3Moe(c)
    init_weights(model)
    if init is not None:
        shape = lambda cfg: {k: v for k, v in cfg.__dict__.items() if isinstance(v, int)}
        if shape(init.c) != shape(c):
            raise ValueError(f"{args.init_gguf}: config {init.c}, expected {c}")
        model.load_state_dict(init.state_dict())
        print(f"initialised from {args.init_gguf}: held-out {evaluate(model, held_ids, c.n_ctx):.4f}", flush=True)
    print(f"config {c}\nparams {count_params(model)} (active per token {active_params(c)})", flush=True)

    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8)
    gen = torch.Generator().manual_seed(args.seed)

    start = time.time()
    smooth = None
    best = None
    for step in range(args.steps):
        for g in opt.param_groups:
            g["lr"] = lr_at(step, args.steps, args.lr, args.warmup)
        x, y = batch_at(train_ids, gen, args.batch, c.n_ctx)
        logits, probs, ids = model(x)
        ce = F.cross_entropy(logits.reshape(-1, c.n_vocab), y.reshape(-1))
        aux = load_balancing_loss(probs, ids, c.n_expert)
        loss = ce + args.aux_coef * aux
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        smooth = ce.item() if smooth is None else 0.95 * smooth + 0.05 * ce.item()
        if step % 10 == 0:
            el = time.time() - start
            print(f"step {step:5d} train {ce.item():.4f} (smooth {smooth:.4f}) aux {aux.item():.3f} "
                  f"lr {opt.param_groups[0]['lr']:.2e} {el:.0f}s ({el / (step + 1):.2f}s/step)", flush=True)
        if (step + 1) % args.eval_every == 0 or step + 1 == args.steps:
            held = evaluate(model, held_ids, c.n_ctx)
            print(f"eval step {step + 1:5d} train_smooth {smooth:.4f} held_out {held:.4f}", flush=True)
            state = {"config": dict(c.__dict__), "model": model.state_dict(),
                     "step": step + 1, "args": vars(args), "held_out": held}
            torch.save(state, os.path.join(args.out, "ckpt.pt"))
            # Many epochs over one book can overfit: keep the best held-out weights too.
            if best is None or held < best:
                best = held
                torch.save(state, os.path.join(args.out, "best.pt"))
            if args.max_minutes and time.time() - start > args.max_minutes * 60:
                print(f"stopping at step {step + 1}: --max-minutes {args.max_minutes} reached", flush=True)
                break
    torch.save(state, os.path.join(args.out, "final.pt"))
    print(f"done in {time.time() - start:.0f}s", flush=True)


if __name__ == "__main__":
    main()
