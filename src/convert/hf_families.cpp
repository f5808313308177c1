#include "convert/hf_families.h"

namespace colibri {

namespace {

using L = HfLayout;

// Tensor names as the Hugging Face modeling files (transformers'
// modeling_qwen3_moe.py, modeling_qwen2_moe.py, modeling_olmoe.py,
// modeling_mixtral.py) register them, and the GGUF names llama.cpp's
// convert_hf_to_gguf.py gives them.
constexpr HfTensorRule kGlobal[] = {
    {"model.embed_tokens.weight", "token_embd.weight"},
    {"model.norm.weight", "output_norm.weight"},
    {"lm_head.weight", "output.weight", L::kAsIs, /*optional=*/true},
};

#define COLIBRI_HF_ATTENTION(q_layout)                                                     \
  {"model.layers.{L}.input_layernorm.weight", "blk.{L}.attn_norm.weight"},                 \
      {"model.layers.{L}.self_attn.q_proj.weight", "blk.{L}.attn_q.weight", q_layout},     \
      {"model.layers.{L}.self_attn.k_proj.weight", "blk.{L}.attn_k.weight", q_layout},     \
      {"model.layers.{L}.self_attn.v_proj.weight", "blk.{L}.attn_v.weight"},               \
      {"model.layers.{L}.self_attn.o_proj.weight", "blk.{L}.attn_output.weight"},          \
      {"model.layers.{L}.self_attn.q_proj.bias", "blk.{L}.attn_q.bias", q_layout, true},   \
      {"model.layers.{L}.self_attn.k_proj.bias", "blk.{L}.attn_k.bias", q_layout, true}, { \
    "model.layers.{L}.self_attn.v_proj.bias", "blk.{L}.attn_v.bias", L::kAsIs, true        \
  }

constexpr HfTensorRule kQwen3Moe[] = {
    COLIBRI_HF_ATTENTION(L::kAsIs),
    {"model.layers.{L}.post_attention_layernorm.weight", "blk.{L}.ffn_norm.weight"},
    {"model.layers.{L}.self_attn.q_norm.weight", "blk.{L}.attn_q_norm.weight"},
    {"model.layers.{L}.self_attn.k_norm.weight", "blk.{L}.attn_k_norm.weight"},
    {"model.layers.{L}.mlp.gate.weight", "blk.{L}.ffn_gate_inp.weight", L::kAsIs, false, true},
    {"model.layers.{L}.mlp.experts.{E}.gate_proj.weight", "blk.{L}.ffn_gate_exps.weight",
     L::kExperts},
    {"model.layers.{L}.mlp.experts.{E}.up_proj.weight", "blk.{L}.ffn_up_exps.weight", L::kExperts},
    {"model.layers.{L}.mlp.experts.{E}.down_proj.weight", "blk.{L}.ffn_down_exps.weight",
     L::kExperts},
};

constexpr HfTensorRule kQwen2Moe[] = {
    COLIBRI_HF_ATTENTION(L::kAsIs),
    {"model.layers.{L}.post_attention_layernorm.weight", "blk.{L}.ffn_norm.weight"},
    {"model.layers.{L}.mlp.gate.weight", "blk.{L}.ffn_gate_inp.weight", L::kAsIs, false, true},
    {"model.layers.{L}.mlp.experts.{E}.gate_proj.weight", "blk.{L}.ffn_gate_exps.weight",
     L::kExperts},
    {"model.layers.{L}.mlp.experts.{E}.up_proj.weight", "blk.{L}.ffn_up_exps.weight", L::kExperts},
    {"model.layers.{L}.mlp.experts.{E}.down_proj.weight", "blk.{L}.ffn_down_exps.weight",
     L::kExperts},
    {"model.layers.{L}.mlp.shared_expert.gate_proj.weight", "blk.{L}.ffn_gate_shexp.weight"},
    {"model.layers.{L}.mlp.shared_expert.up_proj.weight", "blk.{L}.ffn_up_shexp.weight"},
    {"model.layers.{L}.mlp.shared_expert.down_proj.weight", "blk.{L}.ffn_down_shexp.weight"},
    {"model.layers.{L}.mlp.shared_expert_gate.weight", "blk.{L}.ffn_gate_inp_shexp.weight",
     L::kSqueeze},
};

// Mixtral: w1 gate, w3 up, w2 down; GGUF files of the llama family rotate
// interleaved pairs, so q and k are permuted as convert_hf_to_gguf.py does.
constexpr HfTensorRule kMixtral[] = {
    COLIBRI_HF_ATTENTION(L::kRopeRows),
    {"model.layers.{L}.post_attention_layernorm.weight", "blk.{L}.ffn_norm.weight"},
    {"model.layers.{L}.block_sparse_moe.gate.weight", "blk.{L}.ffn_gate_inp.weight", L::kAsIs,
     false, true},
    {"model.layers.{L}.block_sparse_moe.experts.{E}.w1.weight", "blk.{L}.ffn_gate_exps.weight",
     L::kExperts},
    {"model.layers.{L}.block_sparse_moe.experts.{E}.w3.weight", "blk.{L}.ffn_up_exps.weight",
     L::kExperts},
    {"model.layers.{L}.block_sparse_moe.experts.{E}.w2.weight", "blk.{L}.ffn_down_exps.weight",
     L::kExperts},
};

// GLM-4.5 (modeling_glm4_moe.py): leading dense layers, then a sigmoid
// router with a selection bias, routed and shared experts; q/k norms where
// use_qk_norm; the norm before the FFN keeps its Hugging Face name in GGUF.
constexpr HfTensorRule kGlm4Moe[] = {
    COLIBRI_HF_ATTENTION(L::kAsIs),
    {"model.layers.{L}.self_attn.q_norm.weight", "blk.{L}.attn_q_norm.weight", L::kAsIs, true},
    {"model.layers.{L}.self_attn.k_norm.weight", "blk.{L}.attn_k_norm.weight", L::kAsIs, true},
    {"model.layers.{L}.post_attention_layernorm.weight", "blk.{L}.post_attention_norm.weight"},
    {.hf = "model.layers.{L}.mlp.gate_proj.weight",
     .gguf = "blk.{L}.ffn_gate.weight",
     .layers = HfLayers::kDense},
    {.hf = "model.layers.{L}.mlp.up_proj.weight",
     .gguf = "blk.{L}.ffn_up.weight",
     .layers = HfLayers::kDense},
    {.hf = "model.layers.{L}.mlp.down_proj.weight",
     .gguf = "blk.{L}.ffn_down.weight",
     .layers = HfLayers::kDense},
    {.hf = "model.layers.{L}.mlp.gate.weight",
     .gguf = "blk.{L}.ffn_gate_inp.weight",
     .keep_f32 = true,
     .layers = HfLayers::kMoe},
    {.hf = "model.layers.{L}.mlp.gate.e_score_correction_bias",
     .gguf = "blk.{L}.exp_probs_b.bias",
     .layers = HfLayers::kMoe},
    {.hf = "model.layers.{L}.mlp.experts.{E}.gate_proj.weight",
     .gguf = "blk.{L}.ffn_gate_exps.weight",
     .layout = L::kExperts,
     .layers = HfLayers::kMoe},
    {.hf = "model.layers.{L}.mlp.experts.{E}.up_proj.weight",
     .gguf = "blk.{L}.ffn_up_exps.weight",
     .layout = L::kExperts,
     .layers = HfLayers::kMoe},
    {.hf = "model.layers.{L}.mlp.experts.{E}.down_proj.weight",
     .gguf = "blk.{L}.ffn_down_exps.weight",
     .layout = L::kExperts,
     .layers = HfLayers::kMoe},
    {.hf = "model.layers.{L}.mlp.shared_experts.gate_proj.weight",
     .gguf = "blk.{L}.ffn_gate_shexp.weight",
     .layers = HfLayers::kMoe},
    {.hf = "model.layers.{L}.mlp.shared_experts.up_proj.weight",
     .gguf = "blk.{L}.ffn_up_shexp.weight",
     .layers = HfLayers::kMoe},
    {.hf = "model.layers.{L}.mlp.shared_experts.down_proj.weight",
     .gguf = "blk.{L}.ffn_down_shexp.weight",
     .layers = HfLayers::kMoe},
    // The NextN layer's own: the projection of [embedding; hidden state],
    // its norms, and (in some checkpoints) its own embeddings and head.
    {.hf = "model.layers.{L}.eh_proj.weight",
     .gguf = "blk.{L}.nextn.eh_proj.weight",
     .layers = HfLayers::kNextn},
    {.hf = "model.layers.{L}.enorm.weight",
     .gguf = "blk.{L}.nextn.enorm.weight",
     .layers = HfLayers::kNextn},
    {.hf = "model.layers.{L}.hnorm.weight",
     .gguf = "blk.{L}.nextn.hnorm.weight",
     .layers = HfLayers::kNextn},
    {.hf = "model.layers.{L}.shared_head.norm.weight",
     .gguf = "blk.{L}.nextn.shared_head_norm.weight",
     .layers = HfLayers::kNextn},
    {.hf = "model.layers.{L}.embed_tokens.weight",
     .gguf = "blk.{L}.nextn.embed_tokens.weight",
     .optional = true,
     .layers = HfLayers::kNextn},
    {.hf = "model.layers.{L}.shared_head.head.weight",
     .gguf = "blk.{L}.nextn.shared_head_head.weight",
     .optional = true,
     .layers = HfLayers::kNextn},
};

// DeepSeek-V2/V3, Kimi K2, Moonlight (modeling_deepseek.py): multi-head
// latent attention (q through a low-rank q_a/q_b pair, or one q_proj where
// q_lora_rank is null), leading dense layers, routed and shared experts.
// Their RoPE rotates interleaved pairs in both formats: nothing is permuted.
constexpr HfTensorRule kDeepseek2[] = {
    {"model.layers.{L}.input_layernorm.weight", "blk.{L}.attn_norm.weight"},
    {"model.layers.{L}.self_attn.q_proj.weight", "blk.{L}.attn_q.weight", L::kAsIs, true},
    {"model.layers.{L}.self_attn.q_a_proj.weight", "blk.{L}.attn_q_a.weight", L::kAsIs, true},
    {"model.layers.{L}.self_attn.q_a_layernorm.weight", "blk.{L}.attn_q_a_norm.weight", L::kAsIs,
     true},
    {"model.layers.{L}.self_attn.q_b_proj.weight", "blk.{L}.attn_q_b.weight", L::kAsIs, true},
    {"model.layers.{L}.self_attn.kv_a_proj_with_mqa.weight", "blk.{L}.attn_kv_a_mqa.weight"},
    {"model.layers.{L}.self_attn.kv_a_layernorm.weight", "blk.{L}.attn_kv_a_norm.weight"},
    {"model.layers.{L}.self_attn.kv_b_proj.weight", "blk.{L}.attn_k_b.weight", L::kLatentKeys},
    {"model.layers.{L}.self_attn.kv_b_proj.weight", "blk.{L}.attn_v_b.weight", L::kLatentValues},
    {"model.layers.{L}.self_attn.o_proj.weight", "blk.{L}.attn_output.weight"},
    {"model.layers.{L}.post_attention_layernorm.weight", "blk.{L}.ffn_norm.weight"},
    {.hf = "model.layers.{L}.mlp.gate_proj.weight",
     .gguf = "blk.{L}.ffn_gate.weight",
     .layers = HfLayers::kDense},
    {.hf = "model.layers.{L}.mlp.up_proj.weight",
     .gguf = "blk.{L}.ffn_up.weight",
     .layers = HfLayers::kDense},
    {.hf = "model.layers.{L}.mlp.down_proj.weight",
     .gguf = "blk.{L}.ffn_down.weight",
     .layers = HfLayers::kDense},
    {.hf = "model.layers.{L}.mlp.gate.weight",
     .gguf = "blk.{L}.ffn_gate_inp.weight",
     .keep_f32 = true,
     .layers = HfLayers::kMoe},
    {.hf = "model.layers.{L}.mlp.gate.e_score_correction_bias",
     .gguf = "blk.{L}.exp_probs_b.bias",
     .optional = true,
     .layers = HfLayers::kMoe},
    {.hf = "model.layers.{L}.mlp.experts.{E}.gate_proj.weight",
     .gguf = "blk.{L}.ffn_gate_exps.weight",
     .layout = L::kExperts,
     .layers = HfLayers::kMoe},
    {.hf = "model.layers.{L}.mlp.experts.{E}.up_proj.weight",
     .gguf = "blk.{L}.ffn_up_exps.weight",
     .layout = L::kExperts,
     .layers = HfLayers::kMoe},
    {.hf = "model.layers.{L}.mlp.experts.{E}.down_proj.weight",
     .gguf = "blk.{L}.ffn_down_exps.weight",
     .layout = L::kExperts,
     .layers = HfLayers::kMoe},
    {.hf = "model.layers.{L}.mlp.shared_experts.gate_proj.weight",
     .gguf = "blk.{L}.ffn_gate_shexp.weight",
     .optional = true,
     .layers = HfLayers::kMoe},
    {.hf = "model.layers.{L}.mlp.shared_experts.up_proj.weight",
     .gguf = "blk.{L}.ffn_up_shexp.weight",
     .optional = true,
     .layers = HfLayers::kMoe},
    {.hf = "model.layers.{L}.mlp.shared_experts.down_proj.weight",
     .gguf = "blk.{L}.ffn_down_shexp.weight",
     .optional = true,
     .layers = HfLayers::kMoe},
};

// GPT-OSS (modeling_gpt_oss.py, OpenAI's MXFP4 release): attention sinks,
// biases on every projection and the router, gate and up of each expert
// interleaved in one MXFP4 matrix.
constexpr HfTensorRule kGptOss[] = {
    COLIBRI_HF_ATTENTION(L::kAsIs),
    {"model.layers.{L}.self_attn.o_proj.bias", "blk.{L}.attn_output.bias", L::kAsIs, true},
    {"model.layers.{L}.self_attn.sinks", "blk.{L}.attn_sinks.weight"},
    {"model.layers.{L}.post_attention_layernorm.weight", "blk.{L}.post_attention_norm.weight"},
    {.hf = "model.layers.{L}.mlp.router.weight",
     .gguf = "blk.{L}.ffn_gate_inp.weight",
     .keep_f32 = true},
    {.hf = "model.layers.{L}.mlp.router.bias", .gguf = "blk.{L}.ffn_gate_inp.bias"},
    {.hf = "model.layers.{L}.mlp.experts.gate_up_proj",
     .gguf = "blk.{L}.ffn_gate_exps.weight",
     .layout = L::kMxfp4Experts,
     .pick = 0},
    {.hf = "model.layers.{L}.mlp.experts.gate_up_proj",
     .gguf = "blk.{L}.ffn_up_exps.weight",
     .layout = L::kMxfp4Experts,
     .pick = 1},
    {.hf = "model.layers.{L}.mlp.experts.down_proj",
     .gguf = "blk.{L}.ffn_down_exps.weight",
     .layout = L::kMxfp4Experts},
    {.hf = "model.layers.{L}.mlp.experts.gate_up_proj_bias",
     .gguf = "blk.{L}.ffn_gate_exps.bias",
     .layout = L::kPickCols,
     .keep_f32 = true,
     .pick = 0},
    {.hf = "model.layers.{L}.mlp.experts.gate_up_proj_bias",
     .gguf = "blk.{L}.ffn_up_exps.bias",
     .layout = L::kPickCols,
     .keep_f32 = true,
     .pick = 1},
    {.hf = "model.layers.{L}.mlp.experts.down_proj_bias",
     .gguf = "blk.{L}.ffn_down_exps.bias",
     .keep_f32 = true},
};

#undef COLIBRI_HF_ATTENTION

// Routing keys of the families that state their routing (routing_from_file).
constexpr HfConfigKey kGlm4MoeKeys[] = {
    {"n_shared_experts", "expert_shared_count", HfValue::kU32, true},
    {"first_k_dense_replace", "leading_dense_block_count", HfValue::kU32},
    {"routed_scaling_factor", "expert_weights_scale", HfValue::kF32, true},
    {"norm_topk_prob", "expert_weights_norm", HfValue::kBool, true},
    {"n_group", "expert_group_count", HfValue::kU32},
    {"topk_group", "expert_group_used_count", HfValue::kU32},
};

constexpr HfConfigKey kGptOssKeys[] = {
    {"intermediate_size", "expert_feed_forward_length", HfValue::kU32, true},
    {"sliding_window", "attention.sliding_window", HfValue::kU32, true},
};

constexpr HfConfigKey kDeepseek2Keys[] = {
    {"n_shared_experts", "expert_shared_count", HfValue::kU32},
    {"first_k_dense_replace", "leading_dense_block_count", HfValue::kU32},
    {"routed_scaling_factor", "expert_weights_scale", HfValue::kF32, true},
    {"norm_topk_prob", "expert_weights_norm", HfValue::kBool},
    {"n_group", "expert_group_count", HfValue::kU32},
    {"topk_group", "expert_group_used_count", HfValue::kU32},
};

template <typename T, size_t N>
constexpr std::span<const T> rules(const T (&table)[N]) {
  return {table, N};
}

const HfFamily kFamilies[] = {
    {.hf_arch = "Qwen3MoeForCausalLM",
     .gguf_arch = "qwen3moe",
     .tensors = rules(kQwen3Moe),
     .norm_topk_prob = true},
    {.hf_arch = "Qwen2MoeForCausalLM",
     .gguf_arch = "qwen2moe",
     .tensors = rules(kQwen2Moe),
     .norm_topk_prob = false},
    // OLMoE's q/k norms span the whole projection (QkNorm::kFull); its names are Qwen3's.
    {.hf_arch = "OlmoeForCausalLM",
     .gguf_arch = "olmoe",
     .tensors = rules(kQwen3Moe),
     .norm_topk_prob = false},
    {.hf_arch = "MixtralForCausalLM",
     .gguf_arch = "llama",
     .tensors = rules(kMixtral),
     .expert_count_key = "num_local_experts",
     .norm_topk_prob = true},
    {.hf_arch = "Glm4MoeForCausalLM",
     .gguf_arch = "glm4moe",
     .tensors = rules(kGlm4Moe),
     .keys = rules(kGlm4MoeKeys),
     .expert_count_key = "n_routed_experts",
     .dense_lead_key = "first_k_dense_replace",
     .nextn_key = "num_nextn_predict_layers",
     .keep_nextn = true,
     .gating_func = 2,
     .partial_rotary = true},
    {.hf_arch = "GptOssForCausalLM",
     .gguf_arch = "gpt-oss",
     .tensors = rules(kGptOss),
     .keys = rules(kGptOssKeys),
     .expert_count_key = "num_local_experts",
     .used_count_key = "experts_per_token",
     .alternating_windows = true},
    {.hf_arch = "DeepseekV3ForCausalLM",
     .gguf_arch = "deepseek2",
     .tensors = rules(kDeepseek2),
     .keys = rules(kDeepseek2Keys),
     .expert_count_key = "n_routed_experts",
     .dense_lead_key = "first_k_dense_replace",
     .nextn_key = "num_nextn_predict_layers",
     .gating_key = "scoring_func",
     .mla = true},
    {.hf_arch = "DeepseekV2ForCausalLM",
     .gguf_arch = "deepseek2",
     .tensors = rules(kDeepseek2),
     .keys = rules(kDeepseek2Keys),
     .expert_count_key = "n_routed_experts",
     .dense_lead_key = "first_k_dense_replace",
     .gating_key = "scoring_func",
     .mla = true},
};

}  // namespace

std::span<const HfTensorRule> hf_global_rules() {
  return kGlobal;
}

const HfFamily* find_hf_family(std::string_view hf_arch) {
  for (const HfFamily& f : kFamilies)
    if (f.hf_arch == hf_arch) return &f;
  return nullptr;
}

std::string supported_hf_families() {
  std::string s;
  for (const HfFamily& f : kFamilies) {
    if (!s.empty()) s += ", ";
    s += f.hf_arch;
  }
  return s;
}

std::string hf_rule_name(const char* pattern, int layer, int expert) {
  std::string out;
  for (const char* p = pattern; *p; ++p) {
    if (p[0] == '{' && p[1] && p[2] == '}' && (p[1] == 'L' || p[1] == 'E')) {
      out += std::to_string(p[1] == 'L' ? layer : expert);
      p += 2;
    } else {
      out += *p;
    }
  }
  return out;
}

}  // namespace colibri
