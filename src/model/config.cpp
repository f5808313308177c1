#include "model/config.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "formats/gguf.h"

namespace colibri {

namespace {

// Upper bounds that no real model reaches; they keep a hostile file from
// sizing buffers from absurd numbers. A real limit, checked and reported.
constexpr uint64_t kMaxLayers = 1024;
constexpr uint64_t kMaxWidth = 1 << 20;
constexpr uint64_t kMaxExperts = 4096;

int get_int(const GgufFile& f, const std::string& key, uint64_t max, std::optional<uint64_t> dflt) {
  std::optional<uint64_t> v = f.get_uint(key);
  if (!v) {
    CLB_CHECK(dflt.has_value(), "%s: required key %s is missing", f.name().c_str(), key.c_str());
    v = dflt;
  }
  CLB_CHECK(*v <= max, "%s: key %s: value %llu exceeds the limit %llu", f.name().c_str(),
            key.c_str(), static_cast<unsigned long long>(*v), static_cast<unsigned long long>(max));
  return static_cast<int>(*v);
}

// How tokens pick experts: the family's table, or the file's keys where the
// family reads them (llama.cpp's build_moe_ffn arguments).
void read_routing(const GgufFile& f, const std::string& p, ModelConfig& c) {
  c.gating = c.arch->default_gating;
  c.expert_weights_norm = c.arch->renorm_expert_weights;
  if (!c.arch->routing_from_file || !c.is_moe()) return;
  if (std::optional<uint64_t> g = f.get_uint(p + "expert_gating_func")) {
    CLB_CHECK(*g == 1 || *g == 2, "%s: key %sexpert_gating_func: %llu is not 1 (softmax) or 2 (sigmoid)",
              f.name().c_str(), p.c_str(), static_cast<unsigned long long>(*g));
    c.gating = *g == 1 ? Gating::kSoftmax : Gating::kSigmoid;
  }
  c.expert_weights_norm = f.get_bool(p + "expert_weights_norm").value_or(false);
  c.expert_weights_scale = static_cast<float>(f.get_float(p + "expert_weights_scale").value_or(1.0));
  CLB_CHECK(std::isfinite(c.expert_weights_scale) && c.expert_weights_scale >= 0 && c.expert_weights_scale < 1e6,
            "%s: key %sexpert_weights_scale: %g is out of range", f.name().c_str(), p.c_str(),
            c.expert_weights_scale);
  c.n_expert_group = std::max(1, get_int(f, p + "expert_group_count", kMaxExperts, 1));
  c.n_expert_group_used = std::max(1, get_int(f, p + "expert_group_used_count", kMaxExperts, 1));
  CLB_CHECK(c.n_expert_group <= 256 && c.n_expert_group <= c.n_expert && c.n_expert % c.n_expert_group == 0,
            "%s: key %sexpert_group_count: %d groups do not divide %d experts", f.name().c_str(), p.c_str(),
            c.n_expert_group, c.n_expert);
  CLB_CHECK(c.n_expert_group_used <= c.n_expert_group,
            "%s: key %sexpert_group_used_count: %d exceeds expert_group_count %d", f.name().c_str(), p.c_str(),
            c.n_expert_group_used, c.n_expert_group);
  CLB_CHECK(c.n_expert_group == 1 || c.n_expert_group_used * (c.n_expert / c.n_expert_group) >= c.n_expert_used,
            "%s: key %sexpert_group_used_count: %d groups of %d experts cannot hold the %d used",
            f.name().c_str(), p.c_str(), c.n_expert_group_used, c.n_expert / c.n_expert_group, c.n_expert_used);
}

// Multi-head latent attention's ranks. Files from current converters state
// the decompressed head sizes as key_length_mla / value_length_mla (and the
// cache row as key_length = kv_lora_rank + rope); older ones have only
// key_length = nope + rope, value_length = v, and one attn_kv_b tensor.
void read_latent_attention(const GgufFile& f, const std::string& p, ModelConfig& c) {
  c.q_lora_rank = get_int(f, p + "attention.q_lora_rank", kMaxWidth, 0);
  c.kv_lora_rank = get_int(f, p + "attention.kv_lora_rank", kMaxWidth, std::nullopt);
  CLB_CHECK(c.kv_lora_rank > 0 && c.kv_lora_rank <= c.n_embd,
            "%s: key %sattention.kv_lora_rank: %d must be between 1 and the hidden size %d", f.name().c_str(),
            p.c_str(), c.kv_lora_rank, c.n_embd);
  CLB_CHECK(c.q_lora_rank <= c.n_embd, "%s: key %sattention.q_lora_rank: %d exceeds the hidden size %d",
            f.name().c_str(), p.c_str(), c.q_lora_rank, c.n_embd);
  const std::optional<uint64_t> k_mla = f.get_uint(p + "attention.key_length_mla");
  c.mla_legacy_kv_b = !k_mla.has_value();
  const int head_k = c.mla_legacy_kv_b ? c.head_dim : get_int(f, p + "attention.key_length_mla", kMaxWidth, 0);
  c.mla_v = c.mla_legacy_kv_b ? c.head_dim_v : get_int(f, p + "attention.value_length_mla", kMaxWidth, c.head_dim_v);
  CLB_CHECK(c.n_rot > 0 && c.n_rot % 2 == 0 && c.n_rot < head_k,
            "%s: key %srope.dimension_count: %d must be even and below the key head size %d", f.name().c_str(),
            p.c_str(), c.n_rot, head_k);
  c.mla_nope = head_k - c.n_rot;
  CLB_CHECK(c.mla_v > 0, "%s: key %sattention.value_length_mla must be positive", f.name().c_str(), p.c_str());
  // The cache: one "head" of latent + rope key, the latent doubling as value.
  c.n_head_kv = 1;
  c.head_dim = c.kv_lora_rank + c.n_rot;
  c.head_dim_v = c.kv_lora_rank;
}

// RoPE scaling as llama.cpp's context derives it (llama_context's
// constructor): frequency scale, YaRN's ramp and the magnitude of cos/sin,
// and the attention scale (deepseek2: mscale^2 / sqrt(nope + rope)).
void read_rope_scaling(const GgufFile& f, const std::string& p, ModelConfig& c) {
  const std::string type(f.get_string(p + "rope.scaling.type").value_or("none"));
  CLB_CHECK(type == "none" || type == "linear" || type == "yarn",
            "%s: key %srope.scaling.type: '%s' is not supported (none, linear, yarn)", f.name().c_str(),
            p.c_str(), type.c_str());
  float factor = static_cast<float>(f.get_float(p + "rope.scaling.factor").value_or(0.0));
  if (factor == 0.f) {
    const double scale = f.get_float(p + "rope.scale_linear").value_or(1.0);
    factor = static_cast<float>(scale);
  }
  CLB_CHECK(std::isfinite(factor) && factor >= 0 && factor < 1e6, "%s: key %srope.scaling.factor: %g is out of range",
            f.name().c_str(), p.c_str(), factor);
  c.rope_freq_scale = type == "none" || factor == 0.f ? 1.f : 1.f / factor;
  c.n_ctx_orig_yarn = get_int(f, p + "rope.scaling.original_context_length", 1 << 24,
                              static_cast<uint64_t>(c.n_ctx_train));
  float log_mul = static_cast<float>(f.get_float(p + "rope.scaling.yarn_log_multiplier").value_or(0.0));
  if (c.arch->yarn_log_mul_scaled) log_mul /= 0.1f;
  const float attn_factor_key = static_cast<float>(f.get_float(p + "rope.scaling.attn_factor").value_or(1.0));
  float attn_factor = 1.f;
  if (type == "yarn") {
    c.yarn_ext_factor = 1.f;
    auto get_mscale = [](float s, float m) { return s <= 1.f ? 1.f : 0.1f * m * std::log(s) + 1.f; };
    const float f_ = 1.f / c.rope_freq_scale;
    if (log_mul != 0.f) {
      // DeepSeek-V2 states mscale = mscale_all_dim (0.707) and they cancel.
      const float mscale = c.arch->yarn_log_mul_scaled && log_mul != 1.f ? log_mul : 1.f;
      attn_factor = get_mscale(f_, mscale) / get_mscale(f_, log_mul);
    } else {
      attn_factor = get_mscale(f_, 1.f);
    }
    attn_factor *= 1.f / (1.f + 0.1f * std::log(f_));  // rope_yarn multiplies it back
  }
  attn_factor *= attn_factor_key;
  c.rope_mscale = attn_factor;
  if (c.yarn_ext_factor != 0.f) c.rope_mscale *= 1.f + 0.1f * std::log(1.f / c.rope_freq_scale);

  if (c.is_mla()) {
    // The decompressed head size, and YaRN's attention temperature squared.
    const float mscale = attn_factor * (1.f + 0.1f * log_mul * std::log(1.f / c.rope_freq_scale)) *
                         (1.f + 0.1f * std::log(1.f / c.rope_freq_scale));
    c.kq_scale = mscale * mscale / std::sqrt(static_cast<float>(c.mla_nope + c.n_rot));
  } else {
    c.kq_scale = 1.f / std::sqrt(static_cast<float>(c.head_dim));
  }
}

}  // namespace

ModelConfig ModelConfig::from_gguf(const GgufFile& f) {
  ModelConfig c;
  std::string arch(f.require_string("general.architecture"));
  c.arch = find_arch(arch);
  CLB_CHECK(c.arch != nullptr, "%s: architecture '%s' is not supported (supported: %s)",
            f.name().c_str(), arch.c_str(), supported_arch_names());
  const std::string p = arch + ".";
  c.n_layer = get_int(f, p + "block_count", kMaxLayers, std::nullopt);
  c.n_embd = get_int(f, p + "embedding_length", kMaxWidth, std::nullopt);
  c.n_head = get_int(f, p + "attention.head_count", kMaxWidth, std::nullopt);
  CLB_CHECK(c.n_layer > 0 && c.n_embd > 0 && c.n_head > 0,
            "%s: block_count, embedding_length and head_count must be positive", f.name().c_str());
  c.n_head_kv = get_int(f, p + "attention.head_count_kv", kMaxWidth, c.n_head);
  CLB_CHECK(c.n_head_kv > 0 && c.n_head % c.n_head_kv == 0,
            "%s: key %sattention.head_count_kv: %d does not divide head_count %d", f.name().c_str(),
            p.c_str(), c.n_head_kv, c.n_head);
  c.head_dim = get_int(f, p + "attention.key_length", kMaxWidth, c.n_embd / c.n_head);
  c.head_dim_v = get_int(f, p + "attention.value_length", kMaxWidth, c.head_dim);
  CLB_CHECK(c.head_dim > 0 && c.head_dim % 2 == 0 && c.head_dim_v > 0,
            "%s: head dimension %d must be positive and even", f.name().c_str(), c.head_dim);
  c.n_rot = get_int(f, p + "rope.dimension_count", kMaxWidth, c.head_dim);
  CLB_CHECK(c.n_rot > 0 && c.n_rot <= c.head_dim && c.n_rot % 2 == 0,
            "%s: key %srope.dimension_count: %d must be even and at most head dim %d",
            f.name().c_str(), p.c_str(), c.n_rot, c.head_dim);
  c.n_ctx_train = get_int(f, p + "context_length", 1 << 24, 4096);
  c.n_ff = get_int(f, p + "feed_forward_length", kMaxWidth, 0);
  c.n_expert = get_int(f, p + "expert_count", kMaxExperts, 0);
  c.n_expert_used = get_int(f, p + "expert_used_count", kMaxExperts, 0);
  if (c.n_expert > 0) {
    CLB_CHECK(c.n_expert_used >= 1 && c.n_expert_used <= c.n_expert,
              "%s: key %sexpert_used_count: %d must be between 1 and expert_count %d",
              f.name().c_str(), p.c_str(), c.n_expert_used, c.n_expert);
    // Mixtral-style llama files carry only feed_forward_length.
    c.n_ff_exp = get_int(f, p + "expert_feed_forward_length", kMaxWidth, c.n_ff);
  }
  // Multi-token-prediction (NextN) blocks trail the model's own layers;
  // generation never runs them, so they are neither counted nor loaded.
  const int n_nextn = get_int(f, p + "nextn_predict_layers", kMaxLayers, 0);
  CLB_CHECK(n_nextn < c.n_layer, "%s: key %snextn_predict_layers: %d leaves no layers of %d", f.name().c_str(),
            p.c_str(), n_nextn, c.n_layer);
  c.n_layer -= n_nextn;
  c.n_layer_dense_lead = get_int(f, p + "leading_dense_block_count", kMaxLayers, 0);
  CLB_CHECK(c.n_layer_dense_lead <= c.n_layer, "%s: key %sleading_dense_block_count: %d exceeds block_count %d",
            f.name().c_str(), p.c_str(), c.n_layer_dense_lead, c.n_layer);
  // Shared experts: qwen2moe states their width, DeepSeek and GLM a count of
  // experts of n_ff_exp each.
  const int n_shared = get_int(f, p + "expert_shared_count", 64, 0);
  c.n_ff_shexp = get_int(f, p + "expert_shared_feed_forward_length", kMaxWidth,
                         static_cast<uint64_t>(n_shared) * c.n_ff_exp);
  c.rms_eps = static_cast<float>(
      f.get_float(p + "attention.layer_norm_rms_epsilon").value_or(c.arch->default_rms_eps));
  c.rope_base =
      static_cast<float>(f.get_float(p + "rope.freq_base").value_or(c.arch->default_rope_base));
  CLB_CHECK(c.rms_eps > 0 && c.rms_eps < 1, "%s: rms epsilon %g is out of range", f.name().c_str(),
            c.rms_eps);
  CLB_CHECK(c.rope_base > 1, "%s: rope.freq_base %g is out of range", f.name().c_str(),
            c.rope_base);
  read_routing(f, p, c);
  if (c.is_mla()) read_latent_attention(f, p, c);
  read_rope_scaling(f, p, c);
  if (c.arch->default_swa_pattern > 0) {
    c.n_swa = get_int(f, p + "attention.sliding_window", 1 << 24, 0);
    c.swa_pattern = get_int(f, p + "attention.sliding_window_pattern", kMaxLayers,
                            static_cast<uint64_t>(c.arch->default_swa_pattern));
  }
  c.n_vocab = get_int(f, p + "vocab_size", 1 << 24, 0);
  return c;
}

std::string ModelConfig::describe() const {
  std::string s = strprintf(
      "%s: %d layers, n_embd %d, heads %d/%d x %d, n_vocab %d, ctx %d", std::string(arch->name).c_str(),
      n_layer, n_embd, n_head, n_head_kv, head_dim, n_vocab, n_ctx_train);
  if (is_moe())
    s += strprintf(", %d experts (%d used) x n_ff_exp %d", n_expert, n_expert_used, n_ff_exp);
  else
    s += strprintf(", dense n_ff %d", n_ff);
  if (n_ff_shexp) s += strprintf(", shared expert %d", n_ff_shexp);
  if (n_layer_dense_lead) s += strprintf(", %d leading dense layer%s (n_ff %d)", n_layer_dense_lead,
                                         n_layer_dense_lead > 1 ? "s" : "", n_ff);
  if (is_mla())
    s += strprintf("; MLA: q_lora %d, kv_lora %d, nope %d, rope %d, v %d (cache %d values a token and layer)",
                   q_lora_rank, kv_lora_rank, mla_nope, n_rot, mla_v, head_dim);
  else if (n_rot < head_dim)
    s += strprintf("; RoPE on %d of %d dims", n_rot, head_dim);
  if (is_moe()) {
    const char* g = gating == Gating::kSigmoid ? "sigmoid" : gating == Gating::kSoftmax ? "softmax" : "softmax of top-k";
    s += strprintf("; routing %s%s", g, expert_weights_norm ? ", renormalised" : "");
    if (expert_weights_scale != 1.f && expert_weights_scale != 0.f) s += strprintf(", scale %g", expert_weights_scale);
    if (n_expert_group > 1) s += strprintf(", %d of %d groups", n_expert_group_used, n_expert_group);
  }
  if (n_swa) s += strprintf("; sliding window %d (every %d of %d layers)", n_swa, swa_pattern - 1, swa_pattern);
  if (yarn_ext_factor != 0.f) s += strprintf("; YaRN x%g from %d", 1.f / rope_freq_scale, n_ctx_orig_yarn);
  return s;
}

}  // namespace colibri
