// Hyperparameters, read from GGUF metadata ("<arch>.block_count", ...).
#pragma once

#include <cstdint>
#include <string>

#include "model/arch.h"

namespace colibri {

class GgufFile;

// The forward pass's attention takes a batch's tokens this many at a time
// per head (each cached key and value row is read once for all of them), and
// each thread keeps scores for that many queries over the whole context.
// 16: one query a lane of the AVX-512 kernel for heads of up to 256 dims
// (kernels/x86/avx512.cpp's attend_lanes_512).
constexpr int kAttentionQueryBlock = 16;

struct ModelConfig {
  const ArchInfo* arch = nullptr;
  int n_layer = 0;
  int n_embd = 0;
  int n_head = 0;
  int n_head_kv = 0;
  int head_dim = 0;        // per head, for q and k (attention.key_length)
  int head_dim_v = 0;      // per head, for v (attention.value_length)
  int n_rot = 0;           // rotated dims per head (rope.dimension_count)
  int n_vocab = 0;
  int n_ctx_train = 0;
  int n_ff = 0;            // dense FFN width (dense layers)
  int n_expert = 0;        // 0 for a dense model
  int n_expert_used = 0;
  int n_ff_exp = 0;        // width of one routed expert
  int n_ff_shexp = 0;      // width of the shared expert(s), 0 if none
  int n_layer_dense_lead = 0;  // layers before this have a dense FFN (leading_dense_block_count)
  float rms_eps = 1e-6f;
  float rope_base = 1e4f;

  // Routing (moe/router.h): the family's table entry, or the file's keys
  // where the family reads them.
  Gating gating = Gating::kSoftmax;
  bool expert_weights_norm = false;
  float expert_weights_scale = 1.f;
  int n_expert_group = 1;
  int n_expert_group_used = 1;

  // Multi-head latent attention (AttentionKind::kLatent). The cache row is
  // the normed latent and the rope key: head_dim = kv_lora_rank + n_rot with
  // n_head_kv = 1, and head_dim_v = kv_lora_rank (values are the latent).
  int q_lora_rank = 0;     // 0: plain attn_q
  int kv_lora_rank = 0;
  int mla_nope = 0;        // per-head q/k dims without rope (qk_nope_head_dim)
  int mla_v = 0;           // per-head value dims after the up-projection (v_head_dim)
  bool mla_legacy_kv_b = false;  // one attn_kv_b instead of attn_k_b / attn_v_b

  // Sliding-window attention: layer l sees the last n_swa positions when
  // swa_pattern > 0 and l % swa_pattern < swa_pattern - 1.
  int n_swa = 0;
  int swa_pattern = 0;

  // RoPE scaling (linear or YaRN), as llama.cpp derives it from the file:
  // theta_interp = freq_scale * theta; YaRN mixes it with the original
  // frequency by a ramp over pairs [corr_low, corr_high] and scales cos/sin
  // by rope_mscale.
  float rope_freq_scale = 1.f;
  float yarn_ext_factor = 0.f;  // 1 for YaRN
  float yarn_beta_fast = 32.f, yarn_beta_slow = 1.f;
  int n_ctx_orig_yarn = 0;
  float rope_mscale = 1.f;      // magnitude of cos/sin
  float kq_scale = 0.f;         // attention logit scale

  bool is_swa(int l) const { return n_swa > 0 && swa_pattern > 0 && l % swa_pattern < swa_pattern - 1; }
  bool is_mla() const { return arch->attention == AttentionKind::kLatent; }
  // Width of the q projection's output (for MLA: heads x (nope + rope)).
  int n_embd_q_proj() const { return is_mla() ? n_head * (mla_nope + n_rot) : n_embd_q(); }

  int n_embd_q() const { return n_head * head_dim; }
  int n_embd_k() const { return n_head_kv * head_dim; }
  int n_embd_v() const { return n_head_kv * head_dim_v; }
  bool is_moe() const { return n_expert > 0; }

  // Reads and validates; throws Error naming the key. n_vocab comes from the
  // token embedding's shape when the key is absent.
  static ModelConfig from_gguf(const GgufFile& f);
  std::string describe() const;
};

}  // namespace colibri
