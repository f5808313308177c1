#include "convert/hf_convert.h"

#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>
#include <vector>

#include "base/error.h"
#include "base/sys.h"
#include "base/thread_pool.h"
#include "convert/hf_families.h"
#include "formats/gguf_writer.h"
#include "formats/safetensors.h"
#include "model/arch.h"
#include "tensor/half.h"
#include "tensor/ops.h"
#include "tokenizer/hf_tokenizer.h"

namespace colibri {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr uintmax_t kMaxJsonBytes = 256ull
                                    << 20;  // tokenizer.json of the largest vocabularies is ~30 MB

// Reads folder/name; nullopt when absent and !required.
std::optional<std::string> read_text(const fs::path& folder, const char* name, bool required) {
  const fs::path p = folder / name;
  std::error_code ec;
  if (!fs::exists(p, ec)) {
    CLB_CHECK(!required, "%s: the folder has no %s", folder.c_str(), name);
    return std::nullopt;
  }
  const uintmax_t size = fs::file_size(p, ec);
  CLB_CHECK(!ec, "%s: cannot read its size: %s", p.c_str(), ec.message().c_str());
  CLB_CHECK(size <= kMaxJsonBytes,
            "%s: %ju bytes, more than the %ju a JSON file of a model may have", p.c_str(), size,
            kMaxJsonBytes);
  std::ifstream in(p, std::ios::binary);
  CLB_CHECK(in.good(), "%s: cannot open it", p.c_str());
  std::string text(static_cast<size_t>(size), '\0');
  in.read(text.data(), static_cast<std::streamsize>(size));
  CLB_CHECK(in.gcount() == static_cast<std::streamsize>(size), "%s: short read", p.c_str());
  return text;
}

// Reads and parses folder/name; nullopt when absent and !required.
std::optional<json> read_json(const fs::path& folder, const char* name, bool required) {
  const std::optional<std::string> text = read_text(folder, name, required);
  if (!text) return std::nullopt;
  const fs::path p = folder / name;
  try {
    json j = json::parse(*text);
    CLB_CHECK(j.is_object(), "%s: expected a JSON object", p.c_str());
    return j;
  } catch (const json::exception& e) {
    fail("%s: not valid JSON: %s", p.c_str(), e.what());
  }
}

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
  }

  w.set_u32(p + "context_length", static_cast<uint32_t>(n_ctx));
  w.set_u32(p + "embedding_length", static_cast<uint32_t>(n_embd));
  w.set_u32(p + "block_count", static_cast<uint32_t>(s.n_layer));
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

namespace {

// ---- tensors ----------------------------------------------------------------

// llama.cpp's LLAMA_FTYPE for general.file_type.
uint32_t file_type_of(DType t) {
  switch (t) {
    case DType::F32:
      return 0;
    case DType::F16:
      return 1;
    case DType::Q4_0:
      return 2;
    case DType::Q4_1:
      return 3;
    case DType::Q8_0:
      return 7;
    case DType::Q5_0:
      return 8;
    case DType::Q5_1:
      return 9;
    case DType::BF16:
      return 32;
    case DType::MXFP4:
      return 38;  // MXFP4_MOE: the experts MXFP4, the rest as asked
    default:
      return 0;
  }
}

// The GGUF type a checkpoint's dtype stays as when no type is asked for:
// FP8 (DeepSeek-V3, Kimi K2) becomes BF16, as their own cast script makes it.
std::optional<DType> natural_type(StDType t) {
  switch (t) {
    case StDType::kF32:
      return DType::F32;
    case StDType::kF16:
      return DType::F16;
    case StDType::kBF16:
      return DType::BF16;
    case StDType::kF8E4M3:
      return DType::BF16;
    default:
      return std::nullopt;
  }
}

// OCP FP8 E4M3 (1 sign, 4 exponent bits of bias 7, 3 mantissa bits; no
// infinities, S.1111.111 is NaN).
float fp8_e4m3_to_f32(uint8_t b) {
  const int sign = b >> 7, exp = (b >> 3) & 15, man = b & 7;
  float v;
  if (exp == 15 && man == 7)
    v = std::numeric_limits<float>::quiet_NaN();
  else if (exp == 0)
    v = std::ldexp(static_cast<float>(man), -9);  // subnormal: man/8 * 2^-6
  else
    v = std::ldexp(1.f + static_cast<float>(man) / 8.f, exp - 7);
  return sign ? -v : v;
}

// One Hugging Face tensor feeding a GGUF tensor; FP8 weights carry their
// per-block scales (weight_scale_inv: one F32 per block of rows x cols).
struct Source {
  SafetensorsSet::Entry w;
  const SafetensorsSet::Entry* scale = nullptr;
  int64_t block_rows = 0, block_cols = 0;
};

// Row `row` of a source, as floats.
void read_row(const Source& s, int64_t row, float* out) {
  const SafetensorsTensor& t = *s.w.tensor;
  const int64_t cols = t.shape.back();
  const uint8_t* p = s.w.file->data(t) +
                     static_cast<size_t>(row) * static_cast<size_t>(cols) * st_dtype_size(t.dtype);
  switch (t.dtype) {
    case StDType::kF32:
      std::memcpy(out, p, static_cast<size_t>(cols) * 4);
      return;
    case StDType::kF16:
      for (int64_t i = 0; i < cols; ++i) {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        out[i] = fp16_to_fp32(h);
      }
      return;
    case StDType::kBF16:
      for (int64_t i = 0; i < cols; ++i) {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        const uint32_t bits = static_cast<uint32_t>(h) << 16;
        std::memcpy(&out[i], &bits, 4);
      }
      return;
    case StDType::kF8E4M3: {
      const SafetensorsTensor& st = *s.scale->tensor;
      const int64_t scale_cols = st.shape[1];
      const uint8_t* sp =
          s.scale->file->data(st) + static_cast<size_t>(row / s.block_rows * scale_cols) * 4;
      for (int64_t i = 0; i < cols; ++i) {
        float scale;
        std::memcpy(&scale, sp + static_cast<size_t>(i / s.block_cols) * 4, 4);
        out[i] = fp8_e4m3_to_f32(p[i]) * scale;
      }
      return;
    }
    default:
      CLB_ASSERT(false);
  }
}

// One GGUF tensor and where its rows come from.
struct Planned {
  std::string name;
  HfLayout layout = HfLayout::kAsIs;
  DType type = DType::F32;
  std::vector<int64_t> ne;      // GGUF order
  std::vector<Source> sources;  // one, or one per expert
  int64_t rows_per_source = 0;  // kExperts
  int head_dim = 0;             // kRopeRows
  int nope = 0, v = 0;          // kLatentKeys / kLatentValues: each head's key and value rows
  int pick = -1;                // kMxfp4Experts rows, kPickCols columns: even (0) or odd (1)
  int64_t src_rows = 0;         // kMxfp4Experts: rows of each expert in the source
  bool vector = false;          // a 1-D source
};

// GGUF row r of t -> (source, its row). kLatentKeys gathers columns instead.
std::pair<size_t, int64_t> source_row(const Planned& t, int64_t r) {
  switch (t.layout) {
    case HfLayout::kExperts:
      return {static_cast<size_t>(r / t.rows_per_source), r % t.rows_per_source};
    case HfLayout::kRopeRows: {
      // GGUF row h*d + 2i + j holds Hugging Face row h*d + j*d/2 + i.
      const int64_t d = t.head_dim, h = r / d, i = r % d;
      return {0, h * d + (i % 2) * (d / 2) + i / 2};
    }
    case HfLayout::kLatentValues: {
      const int64_t h = r / t.v, i = r % t.v;
      return {0, h * (t.nope + t.v) + t.nope + i};
    }
    default:
      return {0, r};
  }
}

class Planner {
 public:
  Planner(const SafetensorsSet& set, const HfShape& shape, std::optional<DType> type,
          const json& config, std::string where)
      : set_(set), shape_(shape), type_(type), where_(std::move(where)) {
    // FP8 checkpoints state their block size (DeepSeek-V3: 128 x 128).
    if (config.contains("quantization_config") && config["quantization_config"].is_object()) {
      const json& q = config["quantization_config"];
      if (q.contains("weight_block_size")) {
        const json& b = q["weight_block_size"];
        CLB_CHECK(b.is_array() && b.size() == 2 && b[0].is_number_integer() &&
                      b[1].is_number_integer() && b[0].get<int64_t>() > 0 &&
                      b[1].get<int64_t>() > 0 && b[0].get<int64_t>() <= (1 << 20) &&
                      b[1].get<int64_t>() <= (1 << 20),
                  "%s: quantization_config.weight_block_size: expected two positive integers",
                  where_.c_str());
        block_rows_ = b[0].get<int64_t>();
        block_cols_ = b[1].get<int64_t>();
      }
    }
  }

  void add(const HfTensorRule& rule, int layer) {
    Planned t;
    t.name = hf_rule_name(rule.gguf, layer);
    t.layout = rule.layout;
    t.pick = rule.pick;
    if (rule.layout == HfLayout::kMxfp4Experts) return add_mxfp4(rule, layer, std::move(t));
    if (rule.layout == HfLayout::kExperts) {
      const std::string first = hf_rule_name(rule.hf, layer, 0);
      if (!set_.find(first)) {
        CLB_CHECK(rule.optional, "%s: tensor %s is missing (layer %d's expert 0 of %s)",
                  where_.c_str(), first.c_str(), layer, t.name.c_str());
        return;
      }
      for (int e = 0; e < shape_.n_expert; ++e) {
        const std::string n = hf_rule_name(rule.hf, layer, e);
        const SafetensorsSet::Entry* src = set_.find(n);
        CLB_CHECK(src != nullptr, "%s: tensor %s is missing (expert %d of %d in layer %d)",
                  where_.c_str(), n.c_str(), e, shape_.n_expert, layer);
        t.sources.push_back(source(*src));
      }
    } else {
      const std::string n = hf_rule_name(rule.hf, layer);
      const SafetensorsSet::Entry* src = set_.find(n);
      if (!src) {
        CLB_CHECK(rule.optional, "%s: tensor %s is missing", where_.c_str(), n.c_str());
        return;
      }
      t.sources.push_back(source(*src));
    }

    // Shapes: every source alike, a vector or a matrix.
    const SafetensorsTensor& s0 = *t.sources[0].w.tensor;
    const std::string hf0 = s0.name;
    for (const Source& s : t.sources)
      CLB_CHECK(s.w.tensor->shape == s0.shape && s.w.tensor->dtype == s0.dtype,
                "%s: tensor %s: shape or dtype differs from %s (experts of one layer must match)",
                where_.c_str(), s.w.tensor->name.c_str(), hf0.c_str());
    const auto src_type = natural_type(s0.dtype);
    CLB_CHECK(src_type.has_value(),
              "%s: tensor %s: dtype %s is not converted (F32, F16, BF16, F8_E4M3)", where_.c_str(),
              hf0.c_str(), st_dtype_name(s0.dtype));
    CLB_CHECK(s0.shape.size() == 1 || s0.shape.size() == 2,
              "%s: tensor %s: expected 1 or 2 dims, has %zu", where_.c_str(), hf0.c_str(),
              s0.shape.size());
    t.vector = s0.shape.size() == 1;
    const int64_t rows = t.vector ? 1 : s0.shape[0];
    const int64_t cols = s0.shape.back();
    CLB_CHECK(rows > 0 && cols > 0, "%s: tensor %s is empty", where_.c_str(), hf0.c_str());
    t.rows_per_source = rows;
    auto need_matrix = [&] {
      CLB_CHECK(!t.vector, "%s: tensor %s: expected a matrix, has one dim", where_.c_str(),
                hf0.c_str());
    };
    switch (rule.layout) {
      case HfLayout::kAsIs:
        t.ne = t.vector ? std::vector<int64_t>{cols} : std::vector<int64_t>{cols, rows};
        break;
      case HfLayout::kSqueeze:
        CLB_CHECK(rows == 1, "%s: tensor %s: expected one row, has %lld", where_.c_str(),
                  hf0.c_str(), static_cast<long long>(rows));
        t.ne = {cols};
        break;
      case HfLayout::kRopeRows: {
        // A bias is one row of n_heads * head_dim values; a matrix has that many rows.
        const int64_t n = t.vector ? cols : rows;
        CLB_CHECK(n % shape_.head_dim == 0, "%s: tensor %s: %lld rows are not whole heads of %d",
                  where_.c_str(), hf0.c_str(), static_cast<long long>(n), shape_.head_dim);
        t.head_dim = shape_.head_dim;
        t.ne = t.vector ? std::vector<int64_t>{cols} : std::vector<int64_t>{cols, rows};
        break;
      }
      case HfLayout::kExperts:
        need_matrix();
        t.ne = {cols, rows, static_cast<int64_t>(t.sources.size())};
        break;
      case HfLayout::kPickCols:
        need_matrix();
        CLB_CHECK(cols % 2 == 0, "%s: tensor %s: %lld columns do not hold two interleaved sets",
                  where_.c_str(), hf0.c_str(), static_cast<long long>(cols));
        t.ne = {cols / 2, rows};
        break;
      case HfLayout::kMxfp4Experts:
      case HfLayout::kExpertColumns:
        CLB_ASSERT(false);  // planned by add_mxfp4 / add_by_column
      case HfLayout::kLatentKeys:
      case HfLayout::kLatentValues: {
        need_matrix();
        t.nope = shape_.mla_nope;
        t.v = shape_.mla_v;
        const int64_t H = shape_.n_head;
        CLB_CHECK(rows == H * (t.nope + t.v) && cols == shape_.kv_lora,
                  "%s: tensor %s: expected %lld x %d (heads x (qk_nope_head_dim + v_head_dim), "
                  "kv_lora_rank), "
                  "has %lld x %lld",
                  where_.c_str(), hf0.c_str(), static_cast<long long>(H * (t.nope + t.v)),
                  shape_.kv_lora, static_cast<long long>(rows), static_cast<long long>(cols));
        t.ne = rule.layout == HfLayout::kLatentKeys ? std::vector<int64_t>{t.nope, cols, H}
                                                    : std::vector<int64_t>{cols, t.v, H};
        break;
      }
    }

    // The stored type: vectors and routers F32 (as llama.cpp keeps them),
    // matrices as asked, whole blocks only.
    if (t.ne.size() == 1 || rule.keep_f32) {
      t.type = DType::F32;
    } else {
      t.type = type_.value_or(*src_type);
      if (t.ne[0] % dtype_info(t.type).block_size != 0) t.type = DType::F16;
    }
    CLB_CHECK(names_.insert(t.name).second, "%s: two rules make %s", where_.c_str(),
              t.name.c_str());
    plan_.push_back(std::move(t));
  }

  // Every tensor of the folder must have gone somewhere.
  void check_all_used() const {
    for (const std::string& n : set_.names()) {
      if (used_.count(n)) continue;
      // Buffers some checkpoints save and no model needs.
      if (n.size() >= 22 && n.compare(n.size() - 22, 22, ".rotary_emb.inv_freq") == 0) continue;
      // The multi-token-prediction layers after the model's own.
      bool nextn = false;
      for (int k = 0; k < shape_.n_nextn; ++k)
        nextn =
            nextn || n.rfind("model.layers." + std::to_string(shape_.n_layer + k) + ".", 0) == 0;
      if (nextn) continue;
      fail("%s: tensor %s is not part of a model of this family (no rule maps it)", where_.c_str(),
           n.c_str());
    }
  }

  std::vector<Planned>& plan() { return plan_; }

 private:
  // NAME_blocks (experts, rows, blocks, 16) and NAME_scales (experts, rows,
  // blocks), both U8: stay MXFP4 whatever the output type, as llama.cpp's
  // MXFP4_MOE files keep them.
  void add_mxfp4(const HfTensorRule& rule, int layer, Planned t) {
    const std::string base = hf_rule_name(rule.hf, layer);
    const SafetensorsSet::Entry* blocks = set_.find(base + "_blocks");
    const SafetensorsSet::Entry* scales = set_.find(base + "_scales");
    if (!blocks && !scales) {
      if (const SafetensorsSet::Entry* m = set_.find(base))
        return add_by_column(rule, *m, std::move(t));
    }
    CLB_CHECK(blocks && scales, "%s: tensor %s_%s is missing", where_.c_str(), base.c_str(),
              blocks ? "scales" : "blocks");
    used_.insert(blocks->tensor->name);
    used_.insert(scales->tensor->name);
    const auto& b = blocks->tensor->shape;
    const auto& sc = scales->tensor->shape;
    CLB_CHECK(
        blocks->tensor->dtype == StDType::kU8 && b.size() == 4 && b[0] == shape_.n_expert &&
            b[3] == 16,
        "%s: tensor %s_blocks: expected U8 (%d experts, rows, blocks, 16), has %s of %zu dims",
        where_.c_str(), base.c_str(), shape_.n_expert, st_dtype_name(blocks->tensor->dtype),
        b.size());
    CLB_CHECK(scales->tensor->dtype == StDType::kU8 && sc.size() == 3 && sc[0] == b[0] &&
                  sc[1] == b[1] && sc[2] == b[2],
              "%s: tensor %s_scales: expected U8 (%lld, %lld, %lld), one E8M0 exponent per block "
              "of its _blocks",
              where_.c_str(), base.c_str(), static_cast<long long>(b[0]),
              static_cast<long long>(b[1]), static_cast<long long>(b[2]));
    CLB_CHECK(rule.pick < 0 || b[1] % 2 == 0,
              "%s: tensor %s_blocks: %lld rows do not hold gate and up interleaved", where_.c_str(),
              base.c_str(), static_cast<long long>(b[1]));
    t.src_rows = b[1];
    t.rows_per_source = rule.pick < 0 ? b[1] : b[1] / 2;
    t.ne = {b[2] * 32, t.rows_per_source, b[0]};
    t.type = DType::MXFP4;
    t.sources.push_back(Source{*blocks, scales});
    CLB_CHECK(names_.insert(t.name).second, "%s: two rules make %s", where_.c_str(),
              t.name.c_str());
    plan_.push_back(std::move(t));
  }

  // The same experts dequantized (BF16 releases and fine-tunes): one
  // (experts, in, out) tensor whose columns are the GGUF rows, gate and up
  // interleaved by column where rule.pick says.
  void add_by_column(const HfTensorRule& rule, const SafetensorsSet::Entry& m, Planned t) {
    const SafetensorsTensor& st = *m.tensor;
    used_.insert(st.name);
    const auto& sh = st.shape;
    CLB_CHECK(sh.size() == 3 && sh[0] == shape_.n_expert && sh[1] > 0 && sh[2] > 0,
              "%s: tensor %s: expected (%d experts, in, out), has %zu dims", where_.c_str(),
              st.name.c_str(), shape_.n_expert, sh.size());
    CLB_CHECK(rule.pick < 0 || sh[2] % 2 == 0,
              "%s: tensor %s: %lld columns do not hold gate and up interleaved", where_.c_str(),
              st.name.c_str(), static_cast<long long>(sh[2]));
    const auto src_type = natural_type(st.dtype);
    CLB_CHECK(src_type.has_value() && st.dtype != StDType::kF8E4M3,
              "%s: tensor %s: dtype %s is not converted (F32, F16, BF16)", where_.c_str(),
              st.name.c_str(), st_dtype_name(st.dtype));
    t.layout = HfLayout::kExpertColumns;
    t.rows_per_source = rule.pick < 0 ? sh[2] : sh[2] / 2;
    t.ne = {sh[1], t.rows_per_source, sh[0]};
    t.type = type_.value_or(*src_type);
    if (t.ne[0] % dtype_info(t.type).block_size != 0) t.type = DType::F16;
    t.sources.push_back(Source{m});
    CLB_CHECK(names_.insert(t.name).second, "%s: two rules make %s", where_.c_str(),
              t.name.c_str());
    plan_.push_back(std::move(t));
  }

  // The entry, with its FP8 scales where it has them.
  Source source(const SafetensorsSet::Entry& e) {
    used_.insert(e.tensor->name);
    Source s{e};
    if (e.tensor->dtype != StDType::kF8E4M3) return s;
    const std::string sn = e.tensor->name + "_scale_inv";
    s.scale = set_.find(sn);
    CLB_CHECK(s.scale != nullptr, "%s: tensor %s is FP8 without its scales %s", where_.c_str(),
              e.tensor->name.c_str(), sn.c_str());
    used_.insert(sn);
    const SafetensorsTensor& w = *e.tensor;
    const SafetensorsTensor& st = *s.scale->tensor;
    CLB_CHECK(w.shape.size() == 2, "%s: tensor %s: FP8 weights are matrices, this has %zu dims",
              where_.c_str(), w.name.c_str(), w.shape.size());
    s.block_rows = block_rows_;
    s.block_cols = block_cols_;
    const int64_t want_r = (w.shape[0] + block_rows_ - 1) / block_rows_;
    const int64_t want_c = (w.shape[1] + block_cols_ - 1) / block_cols_;
    CLB_CHECK(st.dtype == StDType::kF32 && st.shape.size() == 2 && st.shape[0] == want_r &&
                  st.shape[1] == want_c,
              "%s: tensor %s: expected F32 scales of %lld x %lld (blocks of %lld x %lld), has %s "
              "of %s dims",
              where_.c_str(), sn.c_str(), static_cast<long long>(want_r),
              static_cast<long long>(want_c), static_cast<long long>(block_rows_),
              static_cast<long long>(block_cols_), st_dtype_name(st.dtype),
              st.shape.size() == 2
                  ? (std::to_string(st.shape[0]) + " x " + std::to_string(st.shape[1])).c_str()
                  : std::to_string(st.shape.size()).c_str());
    return s;
  }

  const SafetensorsSet& set_;
  HfShape shape_;
  std::optional<DType> type_;
  std::string where_;
  int64_t block_rows_ = 128, block_cols_ = 128;
  std::vector<Planned> plan_;
  std::set<std::string> used_, names_;
};

// Rows [row0, row0 + n) of t in its GGUF type, into dst.
void fill_range(const Planned& t, int64_t row0, int64_t n, uint8_t* dst) {
  const int64_t cols = t.ne[0];
  const size_t out_row = row_bytes(t.type, cols);
  std::vector<float> f(static_cast<size_t>(cols));
  if (t.vector) {
    // A vector is one row; kRopeRows permutes its values as it would rows.
    CLB_ASSERT(row0 == 0 && n == 1);
    std::vector<float> src(static_cast<size_t>(cols));
    read_row(t.sources[0], 0, src.data());
    for (int64_t i = 0; i < cols; ++i) f[i] = src[source_row(t, i).second];
    quantize_weights(t.type, f.data(), dst, cols);
    return;
  }
  if (t.layout == HfLayout::kMxfp4Experts) {
    // GGUF row r: expert r / rows, its row r % rows (of the picked set).
    const Source& s = t.sources[0];
    const int64_t nb = t.ne[0] / 32;
    const uint8_t* blocks = s.w.file->data(*s.w.tensor);
    const uint8_t* scales = s.scale->file->data(*s.scale->tensor);
    for (int64_t r = row0; r < row0 + n; ++r) {
      const int64_t e = r / t.rows_per_source, i = r % t.rows_per_source;
      const int64_t src = e * t.src_rows + (t.pick < 0 ? i : 2 * i + t.pick);
      uint8_t* out = dst + static_cast<size_t>(r - row0) * out_row;
      for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* in = blocks + static_cast<size_t>((src * nb + b) * 16);
        out[b * 17] = scales[src * nb + b];
        auto code = [&](int k) { return (in[k / 2] >> (4 * (k % 2))) & 15; };
        for (int j = 0; j < 16; ++j)
          out[b * 17 + 1 + j] = static_cast<uint8_t>(code(j) | code(j + 16) << 4);
      }
    }
    return;
  }
  if (t.layout == HfLayout::kExpertColumns) {
    // Each expert's input rows are read once for all of its GGUF rows in
    // the range, whose values are their columns.
    const Source& s = t.sources[0];
    const int64_t per = t.rows_per_source, in = cols;
    std::vector<float> src(static_cast<size_t>(s.w.tensor->shape.back())), buf;
    for (int64_t a = row0; a < row0 + n;) {
      const int64_t e = a / per, b = std::min(row0 + n, (e + 1) * per);
      buf.assign(static_cast<size_t>((b - a) * in), 0.f);
      for (int64_t i = 0; i < in; ++i) {
        read_row(s, e * in + i, src.data());
        for (int64_t r = a; r < b; ++r) {
          const int64_t o = r % per;
          buf[static_cast<size_t>((r - a) * in + i)] =
              src[static_cast<size_t>(t.pick < 0 ? o : 2 * o + t.pick)];
        }
      }
      for (int64_t r = a; r < b; ++r)
        quantize_weights(t.type, &buf[static_cast<size_t>((r - a) * in)],
                         dst + static_cast<size_t>(r - row0) * out_row, in);
      a = b;
    }
    return;
  }
  if (t.layout == HfLayout::kPickCols) {
    std::vector<float> src(static_cast<size_t>(cols * 2));
    for (int64_t r = row0; r < row0 + n; ++r) {
      read_row(t.sources[0], r, src.data());
      for (int64_t i = 0; i < cols; ++i) f[i] = src[2 * i + t.pick];
      quantize_weights(t.type, f.data(), dst + static_cast<size_t>(r - row0) * out_row, cols);
    }
    return;
  }
  if (t.layout == HfLayout::kLatentKeys) {
    // Head h's row j is column j of its nope key rows: each head's rows are
    // read once, then transposed.
    const int64_t kv_lora = t.ne[1];
    std::vector<float> keys(static_cast<size_t>(t.nope * kv_lora));
    int64_t have = -1;
    for (int64_t r = row0; r < row0 + n; ++r) {
      const int64_t h = r / kv_lora, j = r % kv_lora;
      if (h != have) {
        for (int64_t i = 0; i < t.nope; ++i)
          read_row(t.sources[0], h * (t.nope + t.v) + i, &keys[i * kv_lora]);
        have = h;
      }
      for (int64_t i = 0; i < t.nope; ++i) f[i] = keys[i * kv_lora + j];
      quantize_weights(t.type, f.data(), dst + static_cast<size_t>(r - row0) * out_row, cols);
    }
    return;
  }
  for (int64_t r = row0; r < row0 + n; ++r) {
    uint8_t* out = dst + static_cast<size_t>(r - row0) * out_row;
    const auto [si, sr] = source_row(t, r);
    const Source& s = t.sources[si];
    const SafetensorsTensor& st = *s.w.tensor;
    if (natural_type(st.dtype) == t.type && st.dtype != StDType::kF8E4M3) {
      std::memcpy(out, s.w.file->data(st) + static_cast<size_t>(sr) * out_row,
                  out_row);  // bit for bit
    } else {
      read_row(s, sr, f.data());
      quantize_weights(t.type, f.data(), out, cols);
    }
  }
}

// The same, the rows shared among the pool's threads.
void fill_rows(const Planned& t, int64_t row0, int64_t n, uint8_t* dst, ThreadPool& pool) {
  if (t.vector) return fill_range(t, row0, n, dst);
  const size_t out_row = row_bytes(t.type, t.ne[0]);
  pool.parallel_for(n, 8, [&](int64_t b, int64_t e, int) {
    fill_range(t, row0 + b, e - b, dst + static_cast<size_t>(b) * out_row);
  });
}

}  // namespace

bool is_hf_folder(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec) && fs::exists(fs::path(path) / "config.json", ec);
}

namespace {

HfConvertReport convert_folder(const HfConvertOptions& o) {
  const fs::path folder(o.folder);
  std::error_code ec;
  CLB_CHECK(fs::is_directory(folder, ec),
            "%s: not a folder (a Hugging Face model folder has config.json, "
            "model.safetensors and tokenizer.json)",
            o.folder.c_str());
  const json config = *read_json(folder, "config.json", true);
  const std::string cwhere = (folder / "config.json").string();

  // The family.
  CLB_CHECK(config.contains("architectures") && config["architectures"].is_array() &&
                !config["architectures"].empty() && config["architectures"][0].is_string(),
            "%s: architectures: expected a list naming the model class", cwhere.c_str());
  const std::string hf_arch = config["architectures"][0].get<std::string>();
  const HfFamily* fam = find_hf_family(hf_arch);
  CLB_CHECK(fam != nullptr, "%s: architecture %s is not converted (converted: %s)", cwhere.c_str(),
            hf_arch.c_str(), supported_hf_families().c_str());
  CLB_CHECK(find_arch(fam->gguf_arch) != nullptr,
            "family table: %s is not a GGUF family this build runs",
            std::string(fam->gguf_arch).c_str());

  if (o.type) {
    const DType t = *o.type;
    CLB_CHECK(t == DType::F32 || t == DType::F16 || t == DType::BF16 || t == DType::Q8_0 ||
                  t == DType::Q4_0 || t == DType::Q4_1 || t == DType::Q5_0 || t == DType::Q5_1,
              "output type %s is not converted to (f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1)",
              dtype_name(t));
  }

  GgufWriter w;
  w.set_string("general.architecture", std::string(fam->gguf_arch));
  w.set_string("general.type", "model");
  w.set_string("general.name", o.name.empty() ? folder.filename().string() : o.name);
  const HfShape shape = hf_config_to_gguf(config, *fam, w, cwhere);

  // Tensors.
  auto set = SafetensorsSet::open_dir(o.folder);
  Planner planner(*set, shape, o.type, config, o.folder);
  for (const HfTensorRule& r : hf_global_rules()) planner.add(r, -1);
  for (int l = 0; l < shape.n_layer; ++l) {
    const HfLayers kind = l < shape.n_dense_lead ? HfLayers::kDense : HfLayers::kMoe;
    for (const HfTensorRule& r : fam->tensors)
      if (r.layers == HfLayers::kAll || r.layers == kind) planner.add(r, l);
  }
  planner.check_all_used();
  std::vector<Planned>& plan = planner.plan();

  // general.file_type: the type most matrix bytes have.
  DType main_type = DType::F32;
  {
    std::map<DType, uint64_t> bytes;
    for (const Planned& t : plan)
      if (t.ne.size() > 1)
        bytes[t.type] +=
            row_bytes(t.type, t.ne[0]) * (t.ne.size() > 2 ? t.ne[1] * t.ne[2] : t.ne[1]);
    uint64_t best = 0;
    for (auto [t, b] : bytes)
      if (b > best) best = b, main_type = t;
  }
  // llama.cpp's MXFP4_MOE when the experts are MXFP4, whatever the rest is.
  const bool mxfp4 = std::any_of(plan.begin(), plan.end(),
                                 [](const Planned& t) { return t.type == DType::MXFP4; });
  w.set_u32("general.file_type", mxfp4 ? file_type_of(DType::MXFP4) : file_type_of(main_type));
  if (dtype_info(main_type).block_size > 1) w.set_u32("general.quantization_version", 2);

  // The tokenizer and chat template.
  {
    const json tok = *read_json(folder, "tokenizer.json", true);
    const auto tok_cfg = read_json(folder, "tokenizer_config.json", false);
    const auto gen_cfg = read_json(folder, "generation_config.json", false);
    HfTokenizerFiles files;
    files.tokenizer = &tok;
    files.tokenizer_config = tok_cfg ? &*tok_cfg : nullptr;
    files.config = &config;
    files.generation_config = gen_cfg ? &*gen_cfg : nullptr;
    const auto jinja = read_text(folder, "chat_template.jinja", false);
    files.chat_template = jinja ? &*jinja : nullptr;
    import_hf_tokenizer(files, w, o.folder);
  }

  uint64_t total = 0;
  for (const Planned& t : plan) {
    int64_t n_rows = 1;
    for (size_t d = 1; d < t.ne.size(); ++d) n_rows *= t.ne[d];
    total += row_bytes(t.type, t.ne[0]) * static_cast<uint64_t>(n_rows);
  }
  auto done = std::make_shared<std::atomic<uint64_t>>(0);
  const int n_threads = o.n_threads > 0
                            ? o.n_threads
                            : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  auto pool = std::make_shared<ThreadPool>(n_threads);
  for (const Planned& t : plan) {
    const Planned* tp = &t;
    w.add_tensor_info(
        t.name, t.type, t.ne,
        [tp, done, total, pool, &o](int64_t row0, int64_t n_rows, uint8_t* dst) {
          fill_rows(*tp, row0, n_rows, dst, *pool);
          int64_t total_rows = 1;
          for (size_t d = 1; d < tp->ne.size(); ++d) total_rows *= tp->ne[d];
          if (row0 + n_rows == total_rows) {
            // The tensor is written: its sources leave memory, so a model
            // larger than memory converts in about the memory of one tensor.
            for (const Source& s : tp->sources)
              for (const SafetensorsSet::Entry* e : {&s.w, s.scale}) {
                if (!e) continue;
                release_mapped(e->file->data(*e->tensor), e->tensor->nbytes);
                if (e->file->fd() >= 0)
                  drop_file_cache(e->file->fd(), e->tensor->offset, e->tensor->nbytes);
              }
          }
          const uint64_t bytes = row_bytes(tp->type, tp->ne[0]) * static_cast<uint64_t>(n_rows);
          const uint64_t now = done->fetch_add(bytes) + bytes;
          if (o.progress) o.progress(now, total);
        });
  }
  w.write(o.out);

  HfConvertReport rep;
  rep.hf_arch = hf_arch;
  rep.gguf_arch = std::string(fam->gguf_arch);
  rep.n_tensors = plan.size();
  rep.data_bytes = total;
  return rep;
}

}  // namespace

HfConvertReport convert_hf_folder(const HfConvertOptions& o) {
  try {
    return convert_folder(o);
  } catch (const nlohmann::json::exception& e) {
    // A value of a type no check above expected: still the file's fault.
    fail("%s: unexpected JSON: %s", o.folder.c_str(), e.what());
  }
}

}  // namespace colibri
