// config.json -> the family's GGUF hyperparameter keys.
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include "base/error.h"
#include "convert/hf_convert.h"
#include "convert/hf_families.h"
#include "formats/gguf_writer.h"
#include "model/arch.h"

namespace colibri {

namespace {

using nlohmann::json;

// ---- config.json ------------------------------------------------------------

class ConfigReader {
 public:
  ConfigReader(const json& j, std::string where) : j_(j), where_(std::move(where)) {}

  bool has(const char* key) const { return j_.contains(key) && !j_.at(key).is_null(); }

  // A positive integer below 2^31.
  std::optional<int64_t> positive(const char* key,
                                  int64_t max = std::numeric_limits<int32_t>::max()) const {
    if (!has(key)) return std::nullopt;
    const json& v = j_.at(key);
    CLB_CHECK(v.is_number_integer() && v.get<int64_t>() > 0 && v.get<int64_t>() <= max,
              "%s: %s: expected an integer from 1 to %lld, has %s", where_.c_str(), key,
              static_cast<long long>(max), v.dump().substr(0, 40).c_str());
    return v.get<int64_t>();
  }
  int64_t require_positive(const char* key,
                           int64_t max = std::numeric_limits<int32_t>::max()) const {
    auto v = positive(key, max);
    CLB_CHECK(v.has_value(), "%s: the key %s is missing", where_.c_str(), key);
    return *v;
  }
  std::optional<double> number(const char* key, double lo, double hi) const {
    if (!has(key)) return std::nullopt;
    const json& v = j_.at(key);
    CLB_CHECK(v.is_number() && v.get<double>() > lo && v.get<double>() < hi,
              "%s: %s: expected a number between %g and %g, has %s", where_.c_str(), key, lo, hi,
              v.dump().substr(0, 40).c_str());
    return v.get<double>();
  }
  std::optional<bool> boolean(const char* key) const {
    if (!has(key)) return std::nullopt;
    const json& v = j_.at(key);
    CLB_CHECK(v.is_boolean(), "%s: %s: expected true or false, has %s", where_.c_str(), key,
              v.dump().substr(0, 40).c_str());
    return v.get<bool>();
  }
  std::optional<std::string> string(const char* key) const {
    if (!has(key)) return std::nullopt;
    const json& v = j_.at(key);
    CLB_CHECK(v.is_string(), "%s: %s: expected a string, has %s", where_.c_str(), key,
              v.dump().substr(0, 40).c_str());
    return v.get<std::string>();
  }
  const json& at(const char* key) const { return j_.at(key); }
  const std::string& where() const { return where_; }

 private:
  const json& j_;
  std::string where_;
};

}  // namespace

HfShape hf_config_to_gguf(const json& config, const HfFamily& fam, GgufWriter& w,
                          const std::string& where) {
  const ConfigReader c(config, where);
  const std::string p = std::string(fam.gguf_arch) + ".";
  HfShape s;
  s.n_layer = static_cast<int>(c.require_positive("num_hidden_layers", 4096));
  const int64_t n_embd = c.require_positive("hidden_size");
  s.n_head = static_cast<int>(c.require_positive("num_attention_heads", 1 << 16));
  s.n_head_kv = static_cast<int>(c.positive("num_key_value_heads", 1 << 16).value_or(s.n_head));
  CLB_CHECK(s.n_head % s.n_head_kv == 0,
            "%s: num_key_value_heads %d does not divide num_attention_heads %d", where.c_str(),
            s.n_head_kv, s.n_head);
  if (c.has("head_dim")) {
    s.head_dim = static_cast<int>(c.require_positive("head_dim", 1 << 16));
  } else {
    CLB_CHECK(n_embd % s.n_head == 0,
              "%s: hidden_size %lld is not a multiple of num_attention_heads %d", where.c_str(),
              static_cast<long long>(n_embd), s.n_head);
    s.head_dim = static_cast<int>(n_embd / s.n_head);
  }
  CLB_CHECK(s.head_dim % 2 == 0, "%s: head dimension %d is odd", where.c_str(), s.head_dim);
  s.n_expert = static_cast<int>(c.require_positive(fam.expert_count_key, 1 << 16));
  const int64_t n_used = c.require_positive(fam.used_count_key, 1 << 16);
  CLB_CHECK(n_used <= s.n_expert, "%s: %s %lld exceeds %s %d", where.c_str(), fam.used_count_key,
            static_cast<long long>(n_used), fam.expert_count_key, s.n_expert);

  // What the GGUF family cannot say: refused, not dropped.
  if (auto act = c.string("hidden_act"))
    CLB_CHECK(*act == "silu", "%s: hidden_act \"%s\": only silu experts are converted",
              where.c_str(), act->c_str());
  if (auto norm = c.boolean("norm_topk_prob"); norm && fam.norm_topk_prob)
    CLB_CHECK(*norm == *fam.norm_topk_prob,
              "%s: norm_topk_prob %s: %s files always route with norm_topk_prob %s", where.c_str(),
              *norm ? "true" : "false", std::string(fam.gguf_arch).c_str(),
              *fam.norm_topk_prob ? "true" : "false");
  if (auto step = c.positive("decoder_sparse_step"))
    CLB_CHECK(*step == 1,
              "%s: decoder_sparse_step %lld: dense layers between MoE layers are not converted",
              where.c_str(), static_cast<long long>(*step));
  if (c.has("mlp_only_layers")) {
    const json& m = c.at("mlp_only_layers");
    CLB_CHECK(m.is_array() && m.empty(),
              "%s: mlp_only_layers %s: dense layers between MoE layers are not converted",
              where.c_str(), m.dump().substr(0, 40).c_str());
  }
  if (auto swa = c.boolean("use_sliding_window"))
    CLB_CHECK(!*swa,
              "%s: use_sliding_window true: sliding-window attention is not converted for %s",
              where.c_str(), std::string(fam.hf_arch).c_str());
  const int64_t n_ctx = c.positive("max_position_embeddings", 1 << 24).value_or(4096);
  if (fam.alternating_windows) {
    if (c.has("layer_types")) {
      const json& lt = c.at("layer_types");
      CLB_CHECK(lt.is_array() && lt.size() == static_cast<size_t>(s.n_layer),
                "%s: layer_types: expected one entry per layer (%d)", where.c_str(), s.n_layer);
      for (size_t l = 0; l < lt.size(); ++l)
        CLB_CHECK(lt[l] == (l % 2 == 0 ? "sliding_attention" : "full_attention"),
                  "%s: layer_types[%zu] is %s: %s files slide on even layers and attend fully on "
                  "odd ones",
                  where.c_str(), l, lt[l].dump().substr(0, 40).c_str(),
                  std::string(fam.gguf_arch).c_str());
    }
    if (auto limit = c.number("swiglu_limit", 0, 1e6))
      CLB_CHECK(*limit == 7.0, "%s: swiglu_limit %g: %s files clamp at 7", where.c_str(), *limit,
                std::string(fam.gguf_arch).c_str());
  } else if (auto window = c.positive("sliding_window", 1 << 24);
             window && !c.has("use_sliding_window")) {
    CLB_CHECK(*window >= n_ctx,
              "%s: sliding_window %lld below the context %lld: not converted for %s", where.c_str(),
              static_cast<long long>(*window), static_cast<long long>(n_ctx),
              std::string(fam.hf_arch).c_str());
  }
  if (auto freq = c.positive("moe_layer_freq"))
    CLB_CHECK(*freq == 1,
              "%s: moe_layer_freq %lld: dense layers between MoE layers are not converted",
              where.c_str(), static_cast<long long>(*freq));
  CLB_CHECK(!c.has("clip_qkv"), "%s: clip_qkv: clipped q/k/v are not converted", where.c_str());
  int n_rot = s.head_dim;
  if (auto f = c.number("partial_rotary_factor", 0, 1.0001)) {
    CLB_CHECK(*f == 1.0 || fam.partial_rotary,
              "%s: partial_rotary_factor %g: partial RoPE is not converted for %s", where.c_str(),
              *f, std::string(fam.hf_arch).c_str());
    n_rot = static_cast<int>(s.head_dim * *f + 0.5);
    CLB_CHECK(
        n_rot >= 2 && n_rot % 2 == 0 && std::abs(n_rot - s.head_dim * *f) < 1e-6,
        "%s: partial_rotary_factor %g of head dimension %d is not a whole even number of dims",
        where.c_str(), *f, s.head_dim);
  }
  if (fam.dense_lead_key) {
    s.n_dense_lead = static_cast<int>(c.positive(fam.dense_lead_key, 4096).value_or(0));
    if (c.has(fam.dense_lead_key))
      CLB_CHECK(c.at(fam.dense_lead_key).is_number_integer() &&
                    c.at(fam.dense_lead_key).get<int64_t>() >= 0,
                "%s: %s: expected a count of layers", where.c_str(), fam.dense_lead_key);
    CLB_CHECK(s.n_dense_lead < s.n_layer, "%s: %s %d leaves no MoE layer of %d", where.c_str(),
              fam.dense_lead_key, s.n_dense_lead, s.n_layer);
  }
  if (fam.nextn_key && c.has(fam.nextn_key)) {
    CLB_CHECK(c.at(fam.nextn_key).is_number_integer() && c.at(fam.nextn_key).get<int64_t>() >= 0 &&
                  c.at(fam.nextn_key).get<int64_t>() <= 16,
              "%s: %s: expected a count of layers from 0 to 16", where.c_str(), fam.nextn_key);
    s.n_nextn = c.at(fam.nextn_key).get<int>();
    s.keep_nextn = fam.keep_nextn;
  }

  w.set_u32(p + "context_length", static_cast<uint32_t>(n_ctx));
  w.set_u32(p + "embedding_length", static_cast<uint32_t>(n_embd));
  w.set_u32(p + "block_count", static_cast<uint32_t>(s.n_layer + (s.keep_nextn ? s.n_nextn : 0)));
  if (s.keep_nextn) w.set_u32(p + "nextn_predict_layers", static_cast<uint32_t>(s.n_nextn));
  if (auto ff = c.positive("intermediate_size"))
    w.set_u32(p + "feed_forward_length", static_cast<uint32_t>(*ff));
  w.set_u32(p + "attention.head_count", static_cast<uint32_t>(s.n_head));
  if (!fam.mla) w.set_u32(p + "attention.head_count_kv", static_cast<uint32_t>(s.n_head_kv));
  if (auto theta = c.number("rope_theta", 1, 1e12))
    w.set_f32(p + "rope.freq_base", static_cast<float>(*theta));
  if (auto eps = c.number("rms_norm_eps", 0, 1))
    w.set_f32(p + "attention.layer_norm_rms_epsilon", static_cast<float>(*eps));
  w.set_u32(p + "expert_count", static_cast<uint32_t>(s.n_expert));
  w.set_u32(p + "expert_used_count", static_cast<uint32_t>(n_used));
  if (auto ff = c.positive("moe_intermediate_size"))
    w.set_u32(p + "expert_feed_forward_length", static_cast<uint32_t>(*ff));
  if (auto ff = c.positive("shared_expert_intermediate_size"))
    w.set_u32(p + "expert_shared_feed_forward_length", static_cast<uint32_t>(*ff));
  if (fam.mla) {
    // The absorbed form: one KV head holding the latent and the rope key.
    const int64_t q_lora = c.has("q_lora_rank") ? c.require_positive("q_lora_rank", 1 << 16) : 0;
    const int64_t kv_lora = c.require_positive("kv_lora_rank", 1 << 16);
    const int64_t nope = c.require_positive("qk_nope_head_dim", 1 << 16);
    const int64_t rope = c.require_positive("qk_rope_head_dim", 1 << 16);
    const int64_t v = c.require_positive("v_head_dim", 1 << 16);
    CLB_CHECK(rope % 2 == 0, "%s: qk_rope_head_dim %lld is odd", where.c_str(),
              static_cast<long long>(rope));
    s.mla_nope = static_cast<int>(nope);
    s.mla_v = static_cast<int>(v);
    s.kv_lora = static_cast<int>(kv_lora);
    w.set_u32(p + "attention.head_count_kv", 1);
    w.set_u32(p + "attention.key_length", static_cast<uint32_t>(kv_lora + rope));
    w.set_u32(p + "attention.value_length", static_cast<uint32_t>(kv_lora));
    w.set_u32(p + "attention.key_length_mla", static_cast<uint32_t>(nope + rope));
    w.set_u32(p + "attention.value_length_mla", static_cast<uint32_t>(v));
    if (q_lora) w.set_u32(p + "attention.q_lora_rank", static_cast<uint32_t>(q_lora));
    w.set_u32(p + "attention.kv_lora_rank", static_cast<uint32_t>(kv_lora));
    w.set_u32(p + "rope.dimension_count", static_cast<uint32_t>(rope));
  } else {
    w.set_u32(p + "attention.key_length", static_cast<uint32_t>(s.head_dim));
    w.set_u32(p + "attention.value_length", static_cast<uint32_t>(s.head_dim));
    w.set_u32(p + "rope.dimension_count", static_cast<uint32_t>(n_rot));
  }
  if (fam.gating_func) w.set_u32(p + "expert_gating_func", static_cast<uint32_t>(fam.gating_func));
  if (fam.gating_key) {
    const std::string f = c.string(fam.gating_key).value_or("softmax");
    CLB_CHECK(f == "softmax" || f == "sigmoid",
              "%s: %s \"%s\": routing is converted for softmax and sigmoid", where.c_str(),
              fam.gating_key, f.c_str());
    w.set_u32(p + "expert_gating_func", f == "sigmoid" ? 2u : 1u);
  }
  for (const HfConfigKey& k : fam.keys) {
    if (!c.has(k.hf)) {
      CLB_CHECK(!k.required, "%s: the key %s is missing", where.c_str(), k.hf);
      continue;
    }
    switch (k.kind) {
      case HfValue::kU32: {
        const json& v = c.at(k.hf);
        CLB_CHECK(v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() < (1ll << 31),
                  "%s: %s: expected a count, has %s", where.c_str(), k.hf,
                  v.dump().substr(0, 40).c_str());
        w.set_u32(p + k.gguf, static_cast<uint32_t>(v.get<int64_t>()));
        break;
      }
      case HfValue::kF32:
        w.set_f32(p + k.gguf, static_cast<float>(*c.number(k.hf, -1e9, 1e9)));
        break;
      case HfValue::kBool:
        w.set_bool(p + k.gguf, *c.boolean(k.hf));
        break;
    }
  }
  if (auto v = c.positive("vocab_size", 1 << 24))
    w.set_u32(p + "vocab_size", static_cast<uint32_t>(*v));

  if (c.has("rope_scaling")) {
    const json& rs = c.at("rope_scaling");
    CLB_CHECK(rs.is_object(), "%s: rope_scaling: expected an object or null", where.c_str());
    const ConfigReader r(rs, where + ": rope_scaling");
    std::string type = r.string("rope_type").value_or(r.string("type").value_or(""));
    if (type == "yarn") {
      w.set_string(p + "rope.scaling.type", "yarn");
      w.set_f32(p + "rope.scaling.factor",
                static_cast<float>(r.number("factor", 0, 1e6).value_or(1)));
      w.set_u32(
          p + "rope.scaling.original_context_length",
          static_cast<uint32_t>(r.require_positive("original_max_position_embeddings", 1 << 24)));
      if (auto b = r.number("beta_fast", 0, 1e6))
        w.set_f32(p + "rope.scaling.yarn_beta_fast", static_cast<float>(*b));
      if (auto b = r.number("beta_slow", 0, 1e6))
        w.set_f32(p + "rope.scaling.yarn_beta_slow", static_cast<float>(*b));
      // DeepSeek's attention scale: stored as 0.1 * mscale_all_dim, as llama.cpp's converter does.
      const ArchInfo* arch = find_arch(fam.gguf_arch);
      if (auto m = r.number("mscale_all_dim", 0, 1e6); m && arch && arch->yarn_log_mul_scaled)
        w.set_f32(p + "rope.scaling.yarn_log_multiplier", static_cast<float>(0.1 * *m));
    } else if (type == "linear") {
      w.set_string(p + "rope.scaling.type", "linear");
      w.set_f32(p + "rope.scaling.factor",
                static_cast<float>(r.number("factor", 0, 1e6).value_or(1)));
    } else {
      CLB_CHECK(type == "default", "%s: rope_scaling type \"%s\" is not converted (yarn, linear)",
                where.c_str(), type.c_str());
    }
  }
  return s;
}

}  // namespace colibri
