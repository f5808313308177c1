#include "model/arch.h"

namespace colibri {

namespace {

// Facts from the reference implementations (Hugging Face modeling files and
// llama.cpp's graph builders): which families renormalise the top-k router
// weights, which RoPE layout their q/k use, where the q/k norms sit, which
// attention, routing and activation each uses.
constexpr ArchInfo kArchs[] = {
    {.name = "qwen3moe",
     .rope = RopeStyle::kNeox,
     .qk_norm = QkNorm::kPerHead,
     .attn_bias = false,
     .renorm_expert_weights = true,
     .shared_expert_gated = false,
     .default_rms_eps = 1e-6f,
     .default_rope_base = 1e6f},
    {.name = "qwen2moe",
     .rope = RopeStyle::kNeox,
     .qk_norm = QkNorm::kNone,
     .attn_bias = true,
     .renorm_expert_weights = false,
     .shared_expert_gated = true,
     .default_rms_eps = 1e-6f,
     .default_rope_base = 1e6f},
    {.name = "olmoe",
     .rope = RopeStyle::kNeox,
     .qk_norm = QkNorm::kFull,
     .attn_bias = false,
     .renorm_expert_weights = false,
     .shared_expert_gated = false,
     .default_rms_eps = 1e-5f,
     .default_rope_base = 1e4f},
    // Dense Llama, and Mixtral-style MoE when the file has ffn_*_exps.
    {.name = "llama",
     .rope = RopeStyle::kNormal,
     .qk_norm = QkNorm::kNone,
     .attn_bias = false,
     .renorm_expert_weights = true,
     .shared_expert_gated = false,
     .default_rms_eps = 1e-5f,
     .default_rope_base = 1e4f},
    // DeepSeek-MoE (v1): leading dense layers, ungated shared experts,
    // softmax top-k without renormalisation whatever the file says.
    {.name = "deepseek",
     .rope = RopeStyle::kNormal,
     .qk_norm = QkNorm::kNone,
     .attn_bias = false,
     .renorm_expert_weights = false,
     .shared_expert_gated = false,
     .default_rms_eps = 1e-6f,
     .default_rope_base = 1e4f},
    // DeepSeek-V2/V2-Lite/V3/R1, Kimi K2, Moonlight: multi-head latent
    // attention, routing as the file states it (V3: sigmoid, selection bias,
    // groups, scale), ungated shared experts, leading dense layers.
    {.name = "deepseek2",
     .rope = RopeStyle::kNormal,
     .qk_norm = QkNorm::kNone,
     .attn_bias = false,
     .renorm_expert_weights = false,
     .shared_expert_gated = false,
     .default_rms_eps = 1e-6f,
     .default_rope_base = 1e4f,
     .attention = AttentionKind::kLatent,
     .default_gating = Gating::kSoftmax,
     .routing_from_file = true,
     .yarn_log_mul_scaled = true},
    // GPT-OSS: attention sinks, sliding windows on even layers, biases on
    // every projection, softmax over the k selected router logits, the
    // clamped SwiGLU.
    {.name = "gpt-oss",
     .rope = RopeStyle::kNeox,
     .qk_norm = QkNorm::kNone,
     .attn_bias = true,
     .renorm_expert_weights = false,
     .shared_expert_gated = false,
     .default_rms_eps = 1e-5f,
     .default_rope_base = 150000.f,
     .default_gating = Gating::kSoftmaxSelected,
     .expert_activation = ExpertActivation::kSwigluClamped,
     .attn_sinks = true,
     .default_swa_pattern = 2,
     .ffn_norm_name = "post_attention_norm"},
    // GLM-4.5 / 4.5-Air / 4.6: partial RoPE, q/k/v biases, optional per-head
    // q/k norms, sigmoid routing with the selection bias, ungated shared
    // experts, leading dense layers.
    {.name = "glm4moe",
     .rope = RopeStyle::kNeox,
     .qk_norm = QkNorm::kPerHead,
     .qk_norm_optional = true,
     .attn_bias = false,
     .renorm_expert_weights = false,
     .shared_expert_gated = false,
     .default_rms_eps = 1e-5f,
     .default_rope_base = 1e6f,
     .default_gating = Gating::kSigmoid,
     .routing_from_file = true,
     .ffn_norm_name = "post_attention_norm"},
};

}  // namespace

const ArchInfo* find_arch(std::string_view name) {
  for (const ArchInfo& a : kArchs)
    if (a.name == name) return &a;
  return nullptr;
}

const char* supported_arch_names() {
  return "qwen3moe, qwen2moe, olmoe, llama, deepseek, deepseek2, gpt-oss, glm4moe";
}

}  // namespace colibri
