// The shapes `colibri synth` writes: real models' hyperparameters, and tiny
// models of each family for tests (a few MB, widths that are multiples of 256
// so every K-quant applies).
#include "model/synth.h"

namespace colibri {

namespace {

// From each model's config.json on Hugging Face; the keys each family writes
// follow llama.cpp's converters (conversion/*.py: which keys a config leads
// to, e.g. expert_weights_norm only when norm_topk_prob is true, no
// q_lora_rank when it is null).
constexpr SynthShape kShapes[] = {
    // allenai/OLMoE-1B-7B-0924
    {.name = "olmoe-1b-7b", .arch = "olmoe", .n_layer = 16, .n_embd = 2048, .n_head = 16, .n_head_kv = 16,
     .head_dim = 128, .n_vocab = 50304, .n_ctx_train = 4096, .n_ff = 1024, .n_expert = 64, .n_expert_used = 8,
     .n_ff_exp = 1024, .rms_eps = 1e-5f, .rope_base = 1e4f},
    // Qwen/Qwen3-30B-A3B
    {.name = "qwen3-30b-a3b", .arch = "qwen3moe", .n_layer = 48, .n_embd = 2048, .n_head = 32, .n_head_kv = 4,
     .head_dim = 128, .n_vocab = 151936, .n_ctx_train = 40960, .n_ff = 6144, .n_expert = 128, .n_expert_used = 8,
     .n_ff_exp = 768, .rms_eps = 1e-6f, .rope_base = 1e6f, .write_n_ff_exp = true},
    // mistralai/Mixtral-8x7B-v0.1
    {.name = "mixtral-8x7b", .arch = "llama", .n_layer = 32, .n_embd = 4096, .n_head = 32, .n_head_kv = 8,
     .head_dim = 128, .n_vocab = 32000, .n_ctx_train = 32768, .n_ff = 14336, .n_expert = 8, .n_expert_used = 2,
     .n_ff_exp = 14336, .rms_eps = 1e-5f, .rope_base = 1e6f},
    // Qwen/Qwen1.5-MoE-A2.7B
    {.name = "qwen1.5-moe-a2.7b", .arch = "qwen2moe", .n_layer = 24, .n_embd = 2048, .n_head = 16, .n_head_kv = 16,
     .head_dim = 128, .n_vocab = 151936, .n_ctx_train = 8192, .n_ff = 5632, .n_expert = 60, .n_expert_used = 4,
     .n_ff_exp = 1408, .n_ff_shexp = 5632, .rms_eps = 1e-6f, .rope_base = 1e6f, .write_n_ff_exp = true},
    // Qwen/Qwen2-57B-A14B
    {.name = "qwen2-57b-a14b", .arch = "qwen2moe", .n_layer = 28, .n_embd = 3584, .n_head = 28, .n_head_kv = 4,
     .head_dim = 128, .n_vocab = 151936, .n_ctx_train = 32768, .n_ff = 18944, .n_expert = 64, .n_expert_used = 8,
     .n_ff_exp = 2560, .n_ff_shexp = 20480, .rms_eps = 1e-6f, .rope_base = 1e6f, .write_n_ff_exp = true},
    // deepseek-ai/DeepSeek-V3 (and R1): MLA with the q LoRA, 8 groups of 32
    // experts of which 4 are searched, sigmoid scores with the selection bias,
    // YaRN x40 with mscale_all_dim 1. Its MTP layer is not converted.
    {.name = "deepseek-v3-671b", .arch = "deepseek2", .n_layer = 61, .n_embd = 7168, .n_head = 128, .n_head_kv = 1,
     .n_vocab = 129280, .n_ctx_train = 163840, .n_ff = 18432, .n_expert = 256, .n_expert_used = 8,
     .n_ff_exp = 2048, .n_expert_shared = 1, .n_layer_dense_lead = 3, .rms_eps = 1e-6f, .rope_base = 1e4f,
     .n_rot = 64, .write_n_ff_exp = true, .q_lora_rank = 1536, .kv_lora_rank = 512, .qk_nope = 128,
     .v_head_dim = 128, .gating_func = 2, .expert_weights_scale = 2.5f, .expert_weights_norm = true,
     .n_expert_group = 8, .n_expert_group_used = 4, .exp_probs_b = true, .rope_scaling = "yarn",
     .rope_factor = 40, .rope_orig_ctx = 4096, .yarn_beta_fast = 32, .yarn_beta_slow = 1, .yarn_log_mul = 0.1f},
    // moonshotai/Kimi-K2-Instruct: DeepSeek-V3's layout with 384 experts, 64
    // heads, one group, one dense layer.
    {.name = "kimi-k2-1t", .arch = "deepseek2", .n_layer = 61, .n_embd = 7168, .n_head = 64, .n_head_kv = 1,
     .n_vocab = 163840, .n_ctx_train = 131072, .n_ff = 18432, .n_expert = 384, .n_expert_used = 8,
     .n_ff_exp = 2048, .n_expert_shared = 1, .n_layer_dense_lead = 1, .rms_eps = 1e-6f, .rope_base = 5e4f,
     .n_rot = 64, .write_n_ff_exp = true, .q_lora_rank = 1536, .kv_lora_rank = 512, .qk_nope = 128,
     .v_head_dim = 128, .gating_func = 2, .expert_weights_scale = 2.827f, .expert_weights_norm = true,
     .n_expert_group = 1, .n_expert_group_used = 1, .exp_probs_b = true, .rope_scaling = "yarn",
     .rope_factor = 32, .rope_orig_ctx = 4096, .yarn_beta_fast = 1, .yarn_beta_slow = 1, .yarn_log_mul = 0.1f},
    // deepseek-ai/DeepSeek-V2-Lite: MLA without the q LoRA, softmax routing
    // without renormalisation, YaRN x40 with mscale_all_dim 0.707. llama.cpp
    // tells this form (no attention.q_lora_rank) from V3's by its 27 layers,
    // so it loads the whole model but not a slice, nor tiny-deepseek-v2-lite;
    // colibri reads the missing key as 0 and loads them all.
    {.name = "deepseek-v2-lite", .arch = "deepseek2", .n_layer = 27, .n_embd = 2048, .n_head = 16, .n_head_kv = 1,
     .n_vocab = 102400, .n_ctx_train = 163840, .n_ff = 10944, .n_expert = 64, .n_expert_used = 6,
     .n_ff_exp = 1408, .n_expert_shared = 2, .n_layer_dense_lead = 1, .rms_eps = 1e-6f, .rope_base = 1e4f,
     .n_rot = 64, .write_n_ff_exp = true, .kv_lora_rank = 512, .qk_nope = 128, .v_head_dim = 128,
     .gating_func = 1, .expert_weights_scale = 1.0f, .n_expert_group = 1, .n_expert_group_used = 1,
     .rope_scaling = "yarn", .rope_factor = 40, .rope_orig_ctx = 4096, .yarn_beta_fast = 32, .yarn_beta_slow = 1,
     .yarn_log_mul = 0.0707f},
    // moonshotai/Moonlight-16B-A3B: DeepSeek-V2-Lite's attention with V3's
    // routing (sigmoid, selection bias, renormalised, scale 2.446).
    {.name = "moonlight-16b-a3b", .arch = "deepseek2", .n_layer = 27, .n_embd = 2048, .n_head = 16,
     .n_head_kv = 1, .n_vocab = 163840, .n_ctx_train = 8192, .n_ff = 11264, .n_expert = 64, .n_expert_used = 6,
     .n_ff_exp = 1408, .n_expert_shared = 2, .n_layer_dense_lead = 1, .rms_eps = 1e-5f, .rope_base = 5e4f,
     .n_rot = 64, .write_n_ff_exp = true, .kv_lora_rank = 512, .qk_nope = 128, .v_head_dim = 128,
     .gating_func = 2, .expert_weights_scale = 2.446f, .expert_weights_norm = true, .n_expert_group = 1,
     .n_expert_group_used = 1, .exp_probs_b = true},
    // deepseek-ai/deepseek-moe-16b-base (v1): ordinary attention.
    {.name = "deepseek-moe-16b", .arch = "deepseek", .n_layer = 28, .n_embd = 2048, .n_head = 16,
     .n_head_kv = 16, .head_dim = 128, .n_vocab = 102400, .n_ctx_train = 4096, .n_ff = 10944, .n_expert = 64,
     .n_expert_used = 6, .n_ff_exp = 1408, .n_expert_shared = 2, .n_layer_dense_lead = 1, .rms_eps = 1e-6f,
     .rope_base = 1e4f, .write_n_ff_exp = true, .write_head_dims = false, .gating_func = 1,
     .expert_weights_scale = 1.0f, .rope_scaling = "none"},
    // openai/gpt-oss-20b and -120b: sliding window 128 on even layers,
    // attention sinks, biases everywhere, YaRN x32.
    {.name = "gpt-oss-20b", .arch = "gpt-oss", .n_layer = 24, .n_embd = 2880, .n_head = 64, .n_head_kv = 8,
     .head_dim = 64, .n_vocab = 201088, .n_ctx_train = 131072, .n_ff = 2880, .n_expert = 32, .n_expert_used = 4,
     .n_ff_exp = 2880, .rms_eps = 1e-5f, .rope_base = 150000.f, .write_n_ff_exp = true, .write_n_rot = false,
     .rope_scaling = "yarn", .rope_factor = 32, .rope_orig_ctx = 4096, .n_swa = 128},
    {.name = "gpt-oss-120b", .arch = "gpt-oss", .n_layer = 36, .n_embd = 2880, .n_head = 64, .n_head_kv = 8,
     .head_dim = 64, .n_vocab = 201088, .n_ctx_train = 131072, .n_ff = 2880, .n_expert = 128, .n_expert_used = 4,
     .n_ff_exp = 2880, .rms_eps = 1e-5f, .rope_base = 150000.f, .write_n_ff_exp = true, .write_n_rot = false,
     .rope_scaling = "yarn", .rope_factor = 32, .rope_orig_ctx = 4096, .n_swa = 128},
    // zai-org/GLM-4.5-Air: partial RoPE (64 of 128), q/k/v biases, no q/k
    // norms, sigmoid routing with the selection bias, one NextN layer.
    {.name = "glm-4.5-air", .arch = "glm4moe", .n_layer = 46, .n_embd = 4096, .n_head = 96, .n_head_kv = 8,
     .head_dim = 128, .n_vocab = 151552, .n_ctx_train = 131072, .n_ff = 10944, .n_expert = 128,
     .n_expert_used = 8, .n_ff_exp = 1408, .n_expert_shared = 1, .n_layer_dense_lead = 1, .rms_eps = 1e-5f,
     .rope_base = 1e6f, .n_rot = 64, .write_n_ff_exp = true, .gating_func = 2, .expert_weights_scale = 1.0f,
     .expert_weights_norm = true, .exp_probs_b = true, .attn_bias = true, .n_nextn = 1},

    // Tiny models of each family.
    {.name = "tiny", .arch = "qwen3moe", .n_layer = 2, .n_embd = 256, .n_head = 4, .n_head_kv = 2, .head_dim = 64,
     .n_vocab = 4096, .n_ctx_train = 4096, .n_ff = 512, .n_expert = 8, .n_expert_used = 2, .n_ff_exp = 256,
     .rms_eps = 1e-6f, .rope_base = 1e6f, .write_n_ff_exp = true},
    {.name = "tiny-olmoe", .arch = "olmoe", .n_layer = 2, .n_embd = 256, .n_head = 4, .n_head_kv = 4,
     .head_dim = 64, .n_vocab = 4096, .n_ctx_train = 4096, .n_ff = 256, .n_expert = 8, .n_expert_used = 2,
     .n_ff_exp = 256, .rms_eps = 1e-5f, .rope_base = 1e4f},
    {.name = "tiny-mixtral", .arch = "llama", .n_layer = 2, .n_embd = 256, .n_head = 4, .n_head_kv = 2,
     .head_dim = 64, .n_vocab = 4096, .n_ctx_train = 4096, .n_ff = 512, .n_expert = 8, .n_expert_used = 2,
     .n_ff_exp = 512, .rms_eps = 1e-5f, .rope_base = 1e6f},
    {.name = "tiny-qwen2moe", .arch = "qwen2moe", .n_layer = 2, .n_embd = 256, .n_head = 4, .n_head_kv = 2,
     .head_dim = 64, .n_vocab = 4096, .n_ctx_train = 4096, .n_ff = 512, .n_expert = 8, .n_expert_used = 4,
     .n_ff_exp = 256, .n_ff_shexp = 512, .rms_eps = 1e-6f, .rope_base = 1e6f, .write_n_ff_exp = true},
    {.name = "tiny-deepseek-v3", .arch = "deepseek2", .n_layer = 3, .n_embd = 256, .n_head = 4, .n_head_kv = 1,
     .n_vocab = 4096, .n_ctx_train = 163840, .n_ff = 512, .n_expert = 16, .n_expert_used = 4, .n_ff_exp = 256,
     .n_expert_shared = 1, .n_layer_dense_lead = 1, .rms_eps = 1e-6f, .rope_base = 1e4f, .n_rot = 32,
     .write_n_ff_exp = true, .q_lora_rank = 256, .kv_lora_rank = 256, .qk_nope = 64, .v_head_dim = 64,
     .gating_func = 2, .expert_weights_scale = 2.5f, .expert_weights_norm = true, .n_expert_group = 4,
     .n_expert_group_used = 2, .exp_probs_b = true, .rope_scaling = "yarn", .rope_factor = 40,
     .rope_orig_ctx = 4096, .yarn_beta_fast = 32, .yarn_beta_slow = 1, .yarn_log_mul = 0.1f},
    {.name = "tiny-deepseek-v2-lite", .arch = "deepseek2", .n_layer = 3, .n_embd = 256, .n_head = 4,
     .n_head_kv = 1, .n_vocab = 4096, .n_ctx_train = 163840, .n_ff = 512, .n_expert = 16, .n_expert_used = 3,
     .n_ff_exp = 256, .n_expert_shared = 2, .n_layer_dense_lead = 1, .rms_eps = 1e-6f, .rope_base = 1e4f,
     .n_rot = 32, .write_n_ff_exp = true, .kv_lora_rank = 256, .qk_nope = 64, .v_head_dim = 64,
     .gating_func = 1, .expert_weights_scale = 1.0f, .n_expert_group = 1, .n_expert_group_used = 1,
     .rope_scaling = "yarn", .rope_factor = 40, .rope_orig_ctx = 4096, .yarn_beta_fast = 32, .yarn_beta_slow = 1,
     .yarn_log_mul = 0.0707f},
    {.name = "tiny-deepseek-moe", .arch = "deepseek", .n_layer = 3, .n_embd = 256, .n_head = 4, .n_head_kv = 4,
     .head_dim = 64, .n_vocab = 4096, .n_ctx_train = 4096, .n_ff = 512, .n_expert = 16, .n_expert_used = 2,
     .n_ff_exp = 256, .n_expert_shared = 2, .n_layer_dense_lead = 1, .rms_eps = 1e-6f, .rope_base = 1e4f,
     .write_n_ff_exp = true, .write_head_dims = false, .gating_func = 1, .expert_weights_scale = 1.0f,
     .rope_scaling = "none"},
    {.name = "tiny-gpt-oss", .arch = "gpt-oss", .n_layer = 3, .n_embd = 256, .n_head = 4, .n_head_kv = 2,
     .head_dim = 64, .n_vocab = 4096, .n_ctx_train = 131072, .n_ff = 256, .n_expert = 16, .n_expert_used = 4,
     .n_ff_exp = 256, .rms_eps = 1e-5f, .rope_base = 150000.f, .write_n_ff_exp = true, .write_n_rot = false,
     .rope_scaling = "yarn", .rope_factor = 32, .rope_orig_ctx = 4096, .n_swa = 4},
    {.name = "tiny-glm4moe", .arch = "glm4moe", .n_layer = 3, .n_embd = 256, .n_head = 4, .n_head_kv = 2,
     .head_dim = 64, .n_vocab = 4096, .n_ctx_train = 131072, .n_ff = 512, .n_expert = 16, .n_expert_used = 4,
     .n_ff_exp = 256, .n_expert_shared = 1, .n_layer_dense_lead = 1, .rms_eps = 1e-5f, .rope_base = 1e6f,
     .n_rot = 32, .write_n_ff_exp = true, .gating_func = 2, .expert_weights_scale = 2.5f,
     .expert_weights_norm = true, .exp_probs_b = true, .attn_bias = true, .n_nextn = 1},
};

}  // namespace

const SynthShape* find_synth_shape(std::string_view name) {
  for (const SynthShape& s : kShapes)
    if (name == s.name) return &s;
  return nullptr;
}

std::string synth_shape_names() {
  std::string r;
  for (const SynthShape& s : kShapes) r += (r.empty() ? "" : ", ") + std::string(s.name);
  return r;
}

std::vector<const SynthShape*> synth_shapes() {
  std::vector<const SynthShape*> r;
  for (const SynthShape& s : kShapes) r.push_back(&s);
  return r;
}

std::optional<SynthType> parse_synth_type(std::string_view name) {
  for (SynthType t :
       {SynthType::kF32, SynthType::kF16, SynthType::kQ8_0, SynthType::kQ4_0, SynthType::kQ2_K,
        SynthType::kQ3_K_M, SynthType::kQ4_K_M, SynthType::kQ5_K_M, SynthType::kQ6_K,
        SynthType::kMXFP4_MOE, SynthType::kIQ4_NL, SynthType::kIQ4_XS, SynthType::kIQ1_S,
        SynthType::kIQ1_M, SynthType::kIQ2_XXS, SynthType::kIQ2_XS, SynthType::kIQ2_S,
        SynthType::kIQ2_M, SynthType::kIQ3_XXS})
    if (name == synth_type_name(t)) return t;
  return std::nullopt;
}

const char* synth_type_name(SynthType t) {
  if (t == SynthType::kF32) return "f32";
  if (t == SynthType::kF16) return "f16";
  return quant_mix_name(*synth_quant_mix(t));
}

std::optional<QuantMix> synth_quant_mix(SynthType t) {
  switch (t) {
    case SynthType::kF32:
    case SynthType::kF16: return std::nullopt;
    case SynthType::kQ8_0: return QuantMix::kQ8_0;
    case SynthType::kQ4_0: return QuantMix::kQ4_0;
    case SynthType::kQ2_K:
      return QuantMix::kQ2_K;
    case SynthType::kQ3_K_M:
      return QuantMix::kQ3_K_M;
    case SynthType::kQ4_K_M: return QuantMix::kQ4_K_M;
    case SynthType::kQ5_K_M:
      return QuantMix::kQ5_K_M;
    case SynthType::kQ6_K:
      return QuantMix::kQ6_K;
    case SynthType::kMXFP4_MOE: return QuantMix::kMXFP4_MOE;
    case SynthType::kIQ4_NL: return QuantMix::kIQ4_NL;
    case SynthType::kIQ4_XS: return QuantMix::kIQ4_XS;
    case SynthType::kIQ1_S: return QuantMix::kIQ1_S;
    case SynthType::kIQ1_M: return QuantMix::kIQ1_M;
    case SynthType::kIQ2_XXS: return QuantMix::kIQ2_XXS;
    case SynthType::kIQ2_XS: return QuantMix::kIQ2_XS;
    case SynthType::kIQ2_S: return QuantMix::kIQ2_S;
    case SynthType::kIQ2_M: return QuantMix::kIQ2_M;
    case SynthType::kIQ3_XXS: return QuantMix::kIQ3_XXS;
  }
  return std::nullopt;
}

std::optional<SynthRouting> parse_synth_routing(std::string_view name) {
  for (SynthRouting r : {SynthRouting::kNatural, SynthRouting::kUniform, SynthRouting::kZipf})
    if (name == synth_routing_name(r)) return r;
  return std::nullopt;
}

const char* synth_routing_name(SynthRouting r) {
  switch (r) {
    case SynthRouting::kNatural: return "natural";
    case SynthRouting::kUniform: return "uniform";
    case SynthRouting::kZipf: return "zipf";
  }
  return "?";
}

}  // namespace colibri
