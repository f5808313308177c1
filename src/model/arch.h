// Model families as data.
//
// Every family runs through the one generic transformer (transformer.cpp);
// what differs between them is this table: which optional tensors a block has
// and which named mechanism each step uses (MLA attention, attention sinks,
// sliding windows, sigmoid routing with a selection bias, the clamped
// SwiGLU, ...). GGUF metadata sizes them; adding a family is one entry here.
#pragma once

#include <string_view>

#include "moe/router.h"

namespace colibri {

enum class RopeStyle {
  kNormal,  // rotate interleaved pairs (x0, x1), (x2, x3), ... (llama, deepseek)
  kNeox,    // rotate halves (x_i, x_{i + n_rot/2}) (GPT-NeoX, Qwen, OLMoE, GPT-OSS, GLM)
};

enum class QkNorm {
  kNone,
  kPerHead,  // RMSNorm over each head's head_dim values (qwen3moe; glm4moe when present)
  kFull,     // RMSNorm over the whole q / k projection (olmoe)
};

enum class AttentionKind {
  kMultiHead,  // q/k/v projections, grouped-query attention
  kLatent,     // multi-head latent attention (DeepSeek-V2/V3, Kimi K2): the
               // cache holds one compressed latent and one rope key per token
};

enum class ExpertActivation {
  kSilu,            // silu(gate) * up
  kSwigluClamped,   // GPT-OSS: min(g, 7) * sigmoid(1.702 min(g, 7)) * (clamp(u, -7, 7) + 1)
};

struct ArchInfo {
  std::string_view name;        // general.architecture, also the hparam key prefix
  RopeStyle rope;
  QkNorm qk_norm;
  bool qk_norm_optional = false;  // q/k norms only where the file has them (glm4moe)
  bool attn_bias;               // q/k/v projections must carry biases (qwen2moe);
                                // every family takes them where the file has them
  bool renorm_expert_weights;   // default of expert_weights_norm
  bool shared_expert_gated;     // shared expert scaled by sigmoid(ffn_gate_inp_shexp . x)
  float default_rms_eps;
  float default_rope_base;
  AttentionKind attention = AttentionKind::kMultiHead;
  Gating default_gating = Gating::kSoftmax;  // when expert_gating_func is absent
  // Routing as the file states it: expert_gating_func, expert_weights_norm,
  // expert_weights_scale, expert_group_count / expert_group_used_count
  // (deepseek2, glm4moe). Other families route by this table alone.
  bool routing_from_file = false;
  ExpertActivation expert_activation = ExpertActivation::kSilu;
  bool attn_sinks = false;                   // per-head attention sinks (attn_sinks.weight)
  int default_swa_pattern = 0;               // sliding layers: il % pattern < pattern - 1; 0: none
  // The tensor holding the norm before the FFN: "ffn_norm", or
  // "post_attention_norm" (GPT-OSS, GLM-4.5 name it after the attention).
  const char* ffn_norm_name = "ffn_norm";
  // rope.scaling.yarn_log_multiplier is stored as 0.1 * mscale_all_dim and
  // read back divided by 0.1 (deepseek2 files).
  bool yarn_log_mul_scaled = false;
};

// nullptr for an architecture we do not run.
const ArchInfo* find_arch(std::string_view name);

// "qwen3moe, qwen2moe, ..." for error messages.
const char* supported_arch_names();

}  // namespace colibri
