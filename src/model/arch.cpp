#include "model/arch.h"

namespace colibri {

namespace {

// Facts from the reference implementations (Hugging Face modeling files and
// llama.cpp's graph builders): which families renormalise the top-k router
// weights, which RoPE layout their q/k use, where the q/k norms sit.
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
};

}  // namespace

const ArchInfo* find_arch(std::string_view name) {
  for (const ArchInfo& a : kArchs)
    if (a.name == name) return &a;
  return nullptr;
}

const char* supported_arch_names() { return "qwen3moe, qwen2moe, olmoe, llama"; }

}  // namespace colibri
