// A qwen3moe GGUF with random F32 weights, written with GgufWriter: the
// numbers mean nothing, the shapes and byte layout are a real model's.
#pragma once

#include <cstdint>
#include <string>

#include "formats/gguf_writer.h"
#include "tensor/dtype.h"
#include "tensor/ops.h"

namespace colibri::test {

struct SynthShape {
  int n_layer = 2, n_embd = 64, n_head = 4, n_head_kv = 2, head_dim = 16;
  int n_expert = 8, n_expert_used = 2, n_ff_exp = 32, n_vocab = 128;
  DType expert_type = DType::F32;  // the routed experts' stacks, quantized from the F32 draw
};

inline void write_synth_qwen3moe(const std::string& path, const SynthShape& s, uint32_t seed) {
  GgufWriter w;
  const std::string p = "qwen3moe.";
  w.set_string("general.architecture", "qwen3moe");
  w.set_u32(p + "block_count", s.n_layer);
  w.set_u32(p + "embedding_length", s.n_embd);
  w.set_u32(p + "attention.head_count", s.n_head);
  w.set_u32(p + "attention.head_count_kv", s.n_head_kv);
  w.set_u32(p + "attention.key_length", s.head_dim);
  w.set_u32(p + "attention.value_length", s.head_dim);
  w.set_u32(p + "context_length", 256);
  w.set_u32(p + "expert_count", s.n_expert);
  w.set_u32(p + "expert_used_count", s.n_expert_used);
  w.set_u32(p + "expert_feed_forward_length", s.n_ff_exp);
  w.set_u32(p + "vocab_size", s.n_vocab);
  // Rows of uniform values in [-a, a] from a per-tensor LCG.
  uint32_t tensor_seed = seed;
  auto random = [&](const std::string& name, std::vector<int64_t> ne, float a,
                    DType type = DType::F32) {
    const uint32_t ts = tensor_seed++ * 2654435761u;
    const int64_t n0 = ne[0];
    w.add_tensor_info(name, type, ne, [=](int64_t row0, int64_t n_rows, uint8_t* dst) {
      std::vector<float> f(static_cast<size_t>(n0));
      for (int64_t r = 0; r < n_rows; ++r) {
        uint32_t x = ts ^ static_cast<uint32_t>((row0 + r) * 0x9E3779B9u);
        for (int64_t i = 0; i < n0; ++i) {
          x = x * 1664525u + 1013904223u;
          f[i] = a * (static_cast<float>(x >> 8) / 8388608.0f - 1.0f);
        }
        quantize_weights(type, f.data(), dst + r * row_bytes(type, n0), n0);
      }
    });
  };
  auto ones = [&](const std::string& name, int64_t n) {
    w.add_tensor(name, DType::F32, {n}, [&] {
      std::vector<uint8_t> b(n * 4);
      for (int64_t i = 0; i < n; ++i) reinterpret_cast<float*>(b.data())[i] = 1.0f;
      return b;
    }());
  };
  const int64_t E = s.n_embd, nq = s.n_head * s.head_dim, nk = s.n_head_kv * s.head_dim;
  random("token_embd.weight", {E, s.n_vocab}, 1.0f);
  ones("output_norm.weight", E);
  random("output.weight", {E, s.n_vocab}, 0.2f);
  for (int l = 0; l < s.n_layer; ++l) {
    auto n = [&](const char* what) { return "blk." + std::to_string(l) + "." + what + ".weight"; };
    ones(n("attn_norm"), E);
    random(n("attn_q"), {E, nq}, 0.2f);
    random(n("attn_k"), {E, nk}, 0.2f);
    random(n("attn_v"), {E, nk}, 0.2f);
    random(n("attn_output"), {nq, E}, 0.2f);
    ones(n("attn_q_norm"), s.head_dim);
    ones(n("attn_k_norm"), s.head_dim);
    ones(n("ffn_norm"), E);
    random(n("ffn_gate_inp"), {E, s.n_expert}, 0.5f);
    random(n("ffn_gate_exps"), {E, s.n_ff_exp, s.n_expert}, 0.2f, s.expert_type);
    random(n("ffn_up_exps"), {E, s.n_ff_exp, s.n_expert}, 0.2f, s.expert_type);
    random(n("ffn_down_exps"), {s.n_ff_exp, E, s.n_expert}, 0.2f, s.expert_type);
  }
  w.write(path);
}

}  // namespace colibri::test
