#include "convert/hf_tensors.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <vector>

#include "base/error.h"
#include "base/sys.h"
#include "base/thread_pool.h"
#include "tensor/half.h"
#include "tensor/ops.h"

namespace colibri {

namespace {

using nlohmann::json;

// ---- tensors ----------------------------------------------------------------

// A matrix of rows of ne0 in type t: whole blocks only, or F16 (a file
// type's mix has its own fallbacks: apply_quant_mix).
DType matrix_type(DType t, int64_t ne0) { return ne0 % dtype_info(t).block_size == 0 ? t : DType::F16; }

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

// A source's dtype and shape as a weight: packed integers (Source::bits)
// stand for the BF16 matrix they dequantize to, as llama.cpp's converter
// takes them.
std::optional<DType> natural_type(const Source& s) {
  return s.bits ? std::optional<DType>(DType::BF16) : natural_type(s.w.tensor->dtype);
}
const std::vector<int64_t>& shape_of(const Source& s) {
  return s.bits ? s.packed_shape : s.w.tensor->shape;
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

// Row `row` of a source, as floats.
void read_row(const Source& s, int64_t row, float* out) {
  const SafetensorsTensor& t = *s.w.tensor;
  if (s.bits) {  // packed integers: (code - offset) * the group's scale
    const int64_t cols = s.packed_shape[1], words = t.shape[1], per_word = 32 / s.bits;
    const uint8_t* p = s.w.file->data(t) + static_cast<size_t>(row * words) * 4;
    const SafetensorsTensor& st = *s.scale->tensor;
    const int64_t n_groups = st.shape[1];
    const size_t ss = st_dtype_size(st.dtype);
    const uint8_t* sp = s.scale->file->data(st) + static_cast<size_t>(row * n_groups) * ss;
    const uint32_t mask = (1u << s.bits) - 1;
    const int32_t offset = 1 << (s.bits - 1);
    float scale = 0;
    for (int64_t i = 0; i < cols; ++i) {
      if (i % s.group == 0) {
        const uint8_t* q = sp + static_cast<size_t>(i / s.group) * ss;
        uint16_t h = 0;
        if (st.dtype == StDType::kF32) {
          std::memcpy(&scale, q, 4);
        } else {
          std::memcpy(&h, q, 2);
          scale = st.dtype == StDType::kF16 ? fp16_to_fp32(h) : bf16_to_fp32(h);
        }
      }
      uint32_t word;
      std::memcpy(&word, p + static_cast<size_t>(i / per_word) * 4, 4);
      const int32_t code = static_cast<int32_t>((word >> ((i % per_word) * s.bits)) & mask);
      out[i] = static_cast<float>(code - offset) * scale;
    }
    return;
  }
  const int64_t cols = t.shape.back();
  const uint8_t* p = s.w.file->data(t) +
                     static_cast<size_t>(row) * static_cast<size_t>(cols) * st_dtype_size(t.dtype);
  // Element by element through memcpy: a safetensors tensor need not be
  // aligned to its element size (the kernels' dequantize_row assumes it is).
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
      if (q.contains("quant_method") && q["quant_method"] == "compressed-tensors")
        read_compressed_tensors(q);
    }
  }

  // compressed-tensors' pack-quantized integer weights: one config group of
  // symmetric integers in groups of columns, as llama.cpp's converter takes.
  // Anything else is refused when a packed tensor is met (packed_error_).
  void read_compressed_tensors(const json& q) {
    const std::string at = where_ + ": config.json: quantization_config";
    const json* format = q.contains("format") ? &q["format"] : nullptr;
    if (!format || *format != "pack-quantized") {
      packed_error_ = at + ": format " + (format ? format->dump() : "(none)") +
                      " is not converted (pack-quantized is)";
      return;
    }
    const json* groups = q.contains("config_groups") ? &q["config_groups"] : nullptr;
    if (!groups || !groups->is_object() || groups->size() != 1) {
      packed_error_ = at + ".config_groups: expected exactly one group";
      return;
    }
    const json& g = groups->begin().value();
    const json* w = g.is_object() && g.contains("weights") ? &g["weights"] : nullptr;
    auto field = [&](const char* k) { return w && w->is_object() && w->contains(k) ? &(*w)[k] : nullptr; };
    const json* bits = field("num_bits");
    const json* group = field("group_size");
    const json* strategy = field("strategy");
    const json* type = field("type");
    const json* symmetric = field("symmetric");
    if (!bits || !bits->is_number_integer() || !(*bits == 2 || *bits == 4 || *bits == 8)) {
      packed_error_ = at + ": weights.num_bits: expected 2, 4 or 8";
    } else if (!group || !group->is_number_integer() || group->get<int64_t>() <= 0 ||
               group->get<int64_t>() > (1 << 20)) {
      packed_error_ = at + ": weights.group_size: expected a positive integer";
    } else if (!strategy || *strategy != "group") {
      packed_error_ = at + ": weights.strategy: only \"group\" is converted";
    } else if (type && *type != "int") {
      packed_error_ = at + ": weights.type: only \"int\" is converted";
    } else if (symmetric && *symmetric != true) {
      packed_error_ = at + ": weights.symmetric: only symmetric weights (no zero points) are converted";
    } else {
      pack_bits_ = bits->get<int>();
      pack_group_ = group->get<int64_t>();
    }
  }

  // NAME_packed with its scales and shape, for a weight NAME the folder has
  // only packed; nullopt when it has no NAME_packed either.
  std::optional<Source> packed_source(const std::string& name) {
    const SafetensorsSet::Entry* w = set_.find(name + "_packed");
    if (!w) return std::nullopt;
    CLB_CHECK(pack_bits_ > 0, "%s",
              (packed_error_.empty() ? where_ + ": tensor " + name +
                                           "_packed, but config.json's quantization_config is "
                                           "not compressed-tensors"
                                     : packed_error_)
                  .c_str());
    const std::string sn = name + "_scale", hn = name + "_shape";
    const SafetensorsSet::Entry* scale = set_.find(sn);
    const SafetensorsSet::Entry* shape = set_.find(hn);
    CLB_CHECK(scale && shape, "%s: tensor %s_packed without its %s", where_.c_str(), name.c_str(),
              (scale ? hn : sn).c_str());
    CLB_CHECK(!set_.find(name + "_zero_point"),
              "%s: tensor %s has zero points (asymmetric weights), which are not converted",
              where_.c_str(), name.c_str());
    Source s{*w};
    s.scale = scale;
    s.bits = pack_bits_;
    s.group = pack_group_;
    const SafetensorsTensor& ht = *shape->tensor;
    CLB_CHECK((ht.dtype == StDType::kI32 || ht.dtype == StDType::kI64) && ht.n_elements() == 2,
              "%s: tensor %s: expected two integers (rows, columns)", where_.c_str(), hn.c_str());
    for (int k = 0; k < 2; ++k) {
      int64_t v = 0;
      if (ht.dtype == StDType::kI32) {
        int32_t v32;
        std::memcpy(&v32, shape->file->data(ht) + 4 * k, 4);
        v = v32;
      } else {
        std::memcpy(&v, shape->file->data(ht) + 8 * k, 8);
      }
      CLB_CHECK(v > 0 && v <= (int64_t{1} << 31), "%s: tensor %s: dimension %d is %lld",
                where_.c_str(), hn.c_str(), k, static_cast<long long>(v));
      s.packed_shape.push_back(v);
    }
    const int64_t rows = s.packed_shape[0], cols = s.packed_shape[1];
    const int64_t words = (cols * s.bits + 31) / 32, groups = (cols + s.group - 1) / s.group;
    const SafetensorsTensor& wt = *w->tensor;
    CLB_CHECK(wt.dtype == StDType::kI32 && wt.shape.size() == 2 && wt.shape[0] == rows &&
                  wt.shape[1] == words,
              "%s: tensor %s_packed: expected I32 (%lld, %lld) for a (%lld, %lld) weight of %d "
              "bits",
              where_.c_str(), name.c_str(), static_cast<long long>(rows),
              static_cast<long long>(words), static_cast<long long>(rows),
              static_cast<long long>(cols), s.bits);
    const SafetensorsTensor& st = *scale->tensor;
    CLB_CHECK((st.dtype == StDType::kBF16 || st.dtype == StDType::kF16 ||
               st.dtype == StDType::kF32) &&
                  st.shape.size() == 2 && st.shape[0] == rows && st.shape[1] == groups,
              "%s: tensor %s: expected BF16, F16 or F32 scales (%lld, %lld), one per %lld columns",
              where_.c_str(), sn.c_str(), static_cast<long long>(rows),
              static_cast<long long>(groups), static_cast<long long>(s.group));
    for (const std::string& n : {w->tensor->name, sn, hn}) used_.insert(n);
    return s;
  }

  // The weight `name`, plain or packed; nullopt when the folder has neither.
  std::optional<Source> find_source(const std::string& name) {
    if (const SafetensorsSet::Entry* e = set_.find(name)) return source(*e);
    return packed_source(name);
  }

  void add(const HfTensorRule& rule, int layer) {
    Planned t;
    t.name = hf_rule_name(rule.gguf, layer);
    t.layout = rule.layout;
    t.pick = rule.pick;
    if (rule.layout == HfLayout::kMxfp4Experts) return add_mxfp4(rule, layer, std::move(t));
    if (rule.layout == HfLayout::kExperts) {
      const std::string first = hf_rule_name(rule.hf, layer, 0);
      if (!set_.find(first) && !set_.find(first + "_packed")) {
        CLB_CHECK(rule.optional, "%s: tensor %s is missing (layer %d's expert 0 of %s)",
                  where_.c_str(), first.c_str(), layer, t.name.c_str());
        return;
      }
      for (int e = 0; e < shape_.n_expert; ++e) {
        const std::string n = hf_rule_name(rule.hf, layer, e);
        std::optional<Source> src = find_source(n);
        CLB_CHECK(src.has_value(), "%s: tensor %s is missing (expert %d of %d in layer %d)",
                  where_.c_str(), n.c_str(), e, shape_.n_expert, layer);
        t.sources.push_back(std::move(*src));
      }
    } else {
      const std::string n = hf_rule_name(rule.hf, layer);
      std::optional<Source> src = find_source(n);
      if (!src) {
        CLB_CHECK(rule.optional, "%s: tensor %s is missing", where_.c_str(), n.c_str());
        return;
      }
      t.sources.push_back(std::move(*src));
    }

    // Shapes: every source alike, a vector or a matrix.
    const Source& src0 = t.sources[0];
    const SafetensorsTensor& s0 = *src0.w.tensor;
    const std::vector<int64_t>& shape0 = shape_of(src0);
    const std::string hf0 = s0.name;
    for (const Source& s : t.sources)
      CLB_CHECK(shape_of(s) == shape0 && s.w.tensor->dtype == s0.dtype && s.bits == src0.bits,
                "%s: tensor %s: shape or dtype differs from %s (experts of one layer must match)",
                where_.c_str(), s.w.tensor->name.c_str(), hf0.c_str());
    const auto src_type = natural_type(src0);
    CLB_CHECK(src_type.has_value(),
              "%s: tensor %s: dtype %s is not converted (F32, F16, BF16, F8_E4M3, packed "
              "integers)",
              where_.c_str(), hf0.c_str(), st_dtype_name(s0.dtype));
    CLB_CHECK(shape0.size() == 1 || shape0.size() == 2,
              "%s: tensor %s: expected 1 or 2 dims, has %zu", where_.c_str(), hf0.c_str(),
              shape0.size());
    t.vector = shape0.size() == 1;
    const int64_t rows = t.vector ? 1 : shape0[0];
    const int64_t cols = shape0.back();
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
      t.type = matrix_type(type_.value_or(*src_type), t.ne[0]);
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
      // The multi-token-prediction layers after the model's own, where the
      // family leaves them out.
      bool nextn = false;
      for (int k = 0; k < (shape_.keep_nextn ? 0 : shape_.n_nextn); ++k)
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
    t.type = matrix_type(type_.value_or(*src_type), t.ne[0]);
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
  int pack_bits_ = 0;        // compressed-tensors' packed integers, where configured
  int64_t pack_group_ = 0;
  std::string packed_error_;  // why packed integers in this folder are not converted
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
    if (!s.bits && natural_type(st.dtype) == t.type && st.dtype != StDType::kF8E4M3) {
      std::memcpy(out, s.w.file->data(st) + static_cast<size_t>(sr) * out_row,
                  out_row);  // bit for bit
    } else {
      read_row(s, sr, f.data());
      quantize_weights(t.type, f.data(), out, cols);
    }
  }
}

}  // namespace

void apply_quant_mix(QuantMix m, const HfShape& shape, bool mla, std::vector<Planned>& plan) {
  QuantMixModel model;
  model.n_layer_all = shape.n_layer + (shape.keep_nextn ? shape.n_nextn : 0);
  model.n_expert = shape.n_expert;
  model.n_gqa = mla ? shape.n_head : shape.n_head / std::max(1, shape.n_head_kv);  // MLA: one KV head
  model.has_output = false;
  for (const Planned& t : plan) {
    model.n_attn_v += t.name.find("attn_v.weight") != std::string::npos;
    model.has_output |= t.name == "output.weight";
  }
  for (Planned& t : plan) {
    if (t.ne.size() < 2 || t.type == DType::F32 || t.type == DType::MXFP4) continue;
    int layer = -1;
    if (t.name.rfind("blk.", 0) == 0) layer = std::atoi(t.name.c_str() + 4);
    t.type = quant_mix_type(m, model, t.name, t.ne[0], t.ne.size() > 2 ? t.ne[2] : 1, layer);
  }
}

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

std::vector<Planned> plan_tensors(const SafetensorsSet& set, const HfFamily& family,
                                  const HfShape& shape, std::optional<DType> type,
                                  const json& config, const std::string& where) {
  Planner planner(set, shape, type, config, where);
  for (const HfTensorRule& r : hf_global_rules()) planner.add(r, -1);
  const int n_blocks = shape.n_layer + (shape.keep_nextn ? shape.n_nextn : 0);
  for (int l = 0; l < n_blocks; ++l) {
    const HfLayers kind = l < shape.n_dense_lead ? HfLayers::kDense : HfLayers::kMoe;
    const bool nextn = l >= shape.n_layer;
    for (const HfTensorRule& r : family.tensors)
      if (r.layers == HfLayers::kAll || r.layers == kind || (nextn && r.layers == HfLayers::kNextn))
        planner.add(r, l);
  }
  planner.check_all_used();
  return std::move(planner.plan());
}

// The same, the rows shared among the pool's threads.
void fill_rows(const Planned& t, int64_t row0, int64_t n, uint8_t* dst, ThreadPool& pool) {
  if (t.vector) return fill_range(t, row0, n, dst);
  const size_t out_row = row_bytes(t.type, t.ne[0]);
  pool.parallel_for(n, 8, [&](int64_t b, int64_t e, int) {
    fill_range(t, row0 + b, e - b, dst + static_cast<size_t>(b) * out_row);
  });
}

void release_sources(const Planned& t) {
  for (const Source& s : t.sources)
    for (const SafetensorsSet::Entry* e : {&s.w, s.scale}) {
      if (!e) continue;
      release_mapped(e->file->data(*e->tensor), e->tensor->nbytes);
      if (e->file->fd() >= 0) drop_file_cache(e->file->fd(), e->tensor->offset, e->tensor->nbytes);
    }
}

}  // namespace colibri
