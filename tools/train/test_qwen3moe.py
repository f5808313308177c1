"""Checks of the PyTorch qwen3moe reference, the BPE and the GGUF writer.

    /usr/bin/python3 tools/train/test_qwen3moe.py
"""

import json
import os
import tempfile
import unittest

import numpy as np
import torch

import bpe
import gguf
from qwen3moe import Config, MoE, Qwen3Moe, apply_rope, load_balancing_loss, rope_cos_sin, rotate_half

SMALL = Config(n_vocab=64, n_embd=32, n_layer=2, n_head=4, n_head_kv=2, head_dim=16,
               n_expert=4, n_expert_used=2, n_ff_exp=32, n_ctx=16)


def small_model(seed=0):
    torch.manual_seed(seed)
    m = Qwen3Moe(SMALL).double().eval()
    for p in m.parameters():
        torch.nn.init.normal_(p, 0.0, 0.3)
    return m


class RopeTest(unittest.TestCase):
    def test_position_zero_is_identity(self):
        cos, sin = rope_cos_sin(torch.arange(1), 16, 10000.0, torch.float64)
        x = torch.randn(1, 1, 1, 16, dtype=torch.float64)
        self.assertTrue(torch.equal(apply_rope(x, cos, sin), x))

    def test_neox_pairs_dimension_i_with_i_plus_half(self):
        # Rotation of the pair (x[i], x[i + d/2]) by pos * theta^(-2i/d).
        d, pos, theta = 8, 3, 10000.0
        x = torch.randn(d, dtype=torch.float64)
        cos, sin = rope_cos_sin(torch.tensor([pos]), d, theta, torch.float64)
        y = apply_rope(x.view(1, 1, 1, d), cos, sin).view(d)
        for i in range(d // 2):
            a = pos * theta ** (-2 * i / d)
            self.assertAlmostEqual(y[i].item(), x[i].item() * np.cos(a) - x[i + d // 2].item() * np.sin(a), places=12)
            self.assertAlmostEqual(y[i + d // 2].item(), x[i + d // 2].item() * np.cos(a) + x[i].item() * np.sin(a),
                                   places=12)

    def test_rotate_half(self):
        self.assertEqual(rotate_half(torch.tensor([1., 2., 3., 4.])).tolist(), [-3., -4., 1., 2.])

    def test_rope_preserves_norm_and_relative_position(self):
        cos, sin = rope_cos_sin(torch.arange(10), 16, 10000.0, torch.float64)
        q = torch.randn(16, dtype=torch.float64)
        k = torch.randn(16, dtype=torch.float64)
        rq = apply_rope(q.expand(1, 1, 10, 16), cos, sin)[0, 0]
        rk = apply_rope(k.expand(1, 1, 10, 16), cos, sin)[0, 0]
        self.assertTrue(torch.allclose(rq.norm(dim=-1), q.norm().expand(10)))
        self.assertAlmostEqual((rq[5] @ rk[2]).item(), (rq[7] @ rk[4]).item(), places=10)


class ModelTest(unittest.TestCase):
    def test_shapes(self):
        m = small_model()
        tokens = torch.randint(0, SMALL.n_vocab, (3, 7))
        logits, probs, ids = m(tokens)
        self.assertEqual(tuple(logits.shape), (3, 7, SMALL.n_vocab))
        self.assertEqual(len(probs), SMALL.n_layer)
        self.assertEqual(tuple(probs[0].shape), (21, SMALL.n_expert))
        self.assertEqual(tuple(ids[0].shape), (21, SMALL.n_expert_used))

    def test_causal(self):
        m = small_model()
        a = torch.randint(0, SMALL.n_vocab, (1, 10))
        b = a.clone()
        b[0, 6] = (b[0, 6] + 1) % SMALL.n_vocab
        la, _, _ = m(a)
        lb, _, _ = m(b)
        self.assertTrue(torch.equal(la[0, :6], lb[0, :6]))
        self.assertFalse(torch.allclose(la[0, 6:], lb[0, 6:]))

    def test_batch_rows_are_independent(self):
        m = small_model()
        t = torch.randint(0, SMALL.n_vocab, (2, 9))
        both, _, _ = m(t)
        one, _, _ = m(t[1:])
        self.assertTrue(torch.allclose(both[1], one[0], atol=1e-12))

    def test_topk_weights_renormalised(self):
        moe = small_model().layers[0].moe
        probs, ids, weights = moe.route(torch.randn(50, SMALL.n_embd, dtype=torch.float64))
        self.assertTrue(torch.allclose(probs.sum(-1), torch.ones(50, dtype=torch.float64)))
        self.assertTrue(torch.allclose(weights.sum(-1), torch.ones(50, dtype=torch.float64)))
        self.assertTrue(torch.equal(ids, probs.topk(SMALL.n_expert_used, -1).indices))

    def test_moe_matches_per_token_loop(self):
        # Scalar oracle: for each token, sum over its k experts of
        # w * down(silu(gate(x)) * up(x)).
        moe = small_model().layers[1].moe
        x = torch.randn(1, 6, SMALL.n_embd, dtype=torch.float64)
        y, _, _ = moe(x)
        for t in range(6):
            h = x[0, t]
            p = torch.softmax(moe.gate.weight @ h, -1)
            w, e = p.topk(SMALL.n_expert_used)
            w = w / w.sum()
            ref = sum(wi * (moe.down_exps[ei] @ (torch.nn.functional.silu(moe.gate_exps[ei] @ h)
                                                  * (moe.up_exps[ei] @ h))) for wi, ei in zip(w, e))
            self.assertTrue(torch.allclose(y[0, t], ref, atol=1e-12))

    def test_balance_loss_is_one_when_uniform(self):
        n = SMALL.n_expert
        probs = torch.full((n, n), 1.0 / n)
        ids = torch.stack([torch.arange(n), (torch.arange(n) + 1) % n], 1)
        self.assertAlmostEqual(load_balancing_loss([probs], [ids], n).item(), 1.0, places=6)


class BpeTest(unittest.TestCase):
    def test_byte_table_is_gpt2(self):
        t = bpe.bytes_to_unicode()
        self.assertEqual(len(set(t.values())), 256)
        self.assertEqual(t[ord(" ")], "Ġ")
        self.assertEqual(t[ord("\n")], "Ċ")
        self.assertEqual(t[ord("A")], "A")

    def test_pretokenizer_matches_gpt2_splits(self):
        self.assertEqual(bpe.pretokenize("Hello world's  end!!\n\n 123"),
                         ["Hello", " world", "'s", " ", " end", "!!", "\n\n", " 123"])

    def test_train_encode_roundtrip(self):
        text = "the cat sat on the mat. the cat ate the rat! " * 20
        tokens, merges = bpe.train(text, 256 + 30 + 1)
        tok = bpe.Tokenizer(tokens, merges)
        self.assertEqual(tokens[-1], bpe.EOT)
        ids = tok.encode(text)
        self.assertEqual(tok.decode(ids), text)
        self.assertLess(len(ids), len(text.encode()) / 2)

    def test_rank_order_not_frequency(self):
        # With merges [b c, a b], "abc" must become a + bc, not ab + c.
        tok = bpe.Tokenizer([bpe.BYTE_TO_CHAR[i] for i in range(256)] + ["bc", "ab", bpe.EOT],
                            [("b", "c"), ("a", "b")])
        self.assertEqual([tok.tokens[i] for i in tok.encode("abc")], ["a", "bc"])


class GgufTest(unittest.TestCase):
    def test_q8_0_matches_ggml_reference_rounding(self):
        x = np.linspace(-1.0, 1.0, 64, dtype=np.float32)
        raw = gguf.quantize_q8_0(x)
        self.assertEqual(len(raw), 2 * 34)
        d = np.frombuffer(raw[:2], dtype=np.float16)[0]
        self.assertEqual(d, np.float16(np.float32(1.0) / np.float32(127)))
        q = np.frombuffer(raw[2:34], dtype=np.int8)
        self.assertEqual(q[0], -127)
        y = gguf.dequantize_q8_0(raw, 64)
        self.assertLess(np.abs(y - x).max(), float(d) * 0.51 + 1e-3)

    def test_write_read_roundtrip(self):
        w = gguf.Writer()
        w.add("general.architecture", gguf.STRING, "qwen3moe")
        w.add("x.count", gguf.UINT32, 7)
        w.add_array("x.names", gguf.STRING, ["a b", "Ġc"])
        a = np.arange(96, dtype=np.float32).reshape(3, 32) / 7
        w.add_tensor("t.f32", a, gguf.GGML_F32)
        w.add_tensor("t.q8", a, gguf.GGML_Q8_0)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "t.gguf")
            w.write(path)
            r = gguf.Reader(path)
        self.assertEqual(r.kv["x.count"], 7)
        self.assertEqual(r.kv["x.names"], ["a b", "Ġc"])
        self.assertEqual(r.tensors["t.f32"][0], [32, 3])
        self.assertTrue(np.array_equal(r.array("t.f32"), a))
        self.assertLess(np.abs(r.array("t.q8") - a).max(), a.max() / 127)


GOLDEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "shared", "golden")


def golden(name):
    path = os.path.join(GOLDEN, name)
    if not os.path.exists(path):
        raise unittest.SkipTest(f"{path} absent: the shared golden data is not beside this checkout")
    return path


class GoldenTest(unittest.TestCase):
    """The reference and our GGUF reader against llama.cpp's outputs on
    qwen3moe models it ran (../shared/golden, see its README)."""

    def check_model(self, gguf_name, json_name):
        from gguf_model import load_gguf
        model, _, _ = load_gguf(golden(gguf_name), dtype=torch.float64)
        with open(golden(json_name)) as f:
            ref = json.load(f)
        k = model.c.n_expert_used
        worst = 0.0
        for case in ref["cases"]:
            with torch.no_grad():
                logits, probs, _ = model(torch.tensor([case["tokens"]]))
            for t, row in enumerate(case["prompt_top"]):
                for tid, value in row:
                    err = abs(logits[0, t, tid].item() - value) / max(1.0, abs(value))
                    worst = max(worst, err)
                for layer, experts in enumerate(case["experts"][t]):
                    if case["router_gap"][t][layer] > 1e-3:
                        ours = probs[layer][t].topk(k).indices.tolist()
                        self.assertEqual(set(ours), set(experts), f"{case['name']} pos {t} layer {layer}")
            self.assertEqual(logits[0, -1].argmax().item(), case["gen_tokens"][0])
        self.assertLess(worst, 1e-4, f"{gguf_name}: worst relative logit error {worst}")

    def test_qwen3moe_f32(self):
        self.check_model("qwen3moe-f32.gguf", "qwen3moe-f32.json")

    def test_qwen3moe_q8_0_dequantized(self):
        self.check_model("qwen3moe-q8_0.gguf", "qwen3moe-q8_0.dequant-f32.json")

    def test_q8_0_requantizes_to_the_ggml_bytes(self):
        # The golden file was written with ggml's reference quantizer; its
        # dequantized values must quantize back to exactly the stored blocks.
        r = gguf.Reader(golden("qwen3moe-q8_0.gguf"))
        names = [n for n, (_, t, _) in r.tensors.items() if t == gguf.GGML_Q8_0]
        self.assertGreater(len(names), 5)
        for name in names:
            self.assertEqual(gguf.quantize_q8_0(r.array(name)), r.tensors[name][2], name)

    def test_gpt2_tokenizer_matches_llama_cpp(self):
        # Full GPT-2 vocabulary (50257) and a cut one (4096), both gpt-2 pre-tokenizer.
        for gguf_name, json_name in [("qwen3moe-q4_0.gguf", "qwen3moe-q4_0.json"),
                                     ("qwen2moe-f32.gguf", "qwen2moe-f32.json")]:
            r = gguf.Reader(golden(gguf_name))
            self.assertEqual(r.kv["tokenizer.ggml.pre"], "gpt-2")
            tok = bpe.Tokenizer(r.kv["tokenizer.ggml.tokens"],
                                [m.split(" ") for m in r.kv["tokenizer.ggml.merges"]])
            with open(golden(json_name)) as f:
                ref = json.load(f)
            self.assertFalse(ref["vocab"]["add_bos"])
            for case in ref["cases"]:
                self.assertEqual(tok.encode(case["prompt"]), case["tokens"], f"{gguf_name} {case['name']}")


if __name__ == "__main__":
    unittest.main()
