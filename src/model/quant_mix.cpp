#include "model/quant_mix.h"

namespace colibri {

namespace {

constexpr QuantMix kMixes[] = {QuantMix::kQ8_0,      QuantMix::kQ4_0,   QuantMix::kQ2_K,
                               QuantMix::kQ3_K_M,    QuantMix::kQ4_K_M, QuantMix::kQ5_K_M,
                               QuantMix::kQ6_K,      QuantMix::kIQ4_NL, QuantMix::kIQ4_XS,
                               QuantMix::kMXFP4_MOE, QuantMix::kIQ1_S,  QuantMix::kIQ1_M,
                               QuantMix::kIQ2_XXS,   QuantMix::kIQ2_XS, QuantMix::kIQ2_S,
                               QuantMix::kIQ2_M,     QuantMix::kIQ3_XXS};

}  // namespace

DType quant_mix_base(QuantMix m) {
  switch (m) {
    case QuantMix::kQ8_0: return DType::Q8_0;
    case QuantMix::kQ4_0: return DType::Q4_0;
    case QuantMix::kQ2_K:
      return DType::Q2_K;
    case QuantMix::kQ3_K_M:
      return DType::Q3_K;
    case QuantMix::kQ4_K_M: return DType::Q4_K;
    case QuantMix::kQ5_K_M: return DType::Q5_K;
    case QuantMix::kQ6_K: return DType::Q6_K;
    case QuantMix::kIQ4_NL: return DType::IQ4_NL;
    case QuantMix::kIQ4_XS: return DType::IQ4_XS;
    case QuantMix::kMXFP4_MOE: return DType::MXFP4;
    case QuantMix::kIQ1_S: return DType::IQ1_S;
    case QuantMix::kIQ1_M: return DType::IQ1_M;
    case QuantMix::kIQ2_XXS: return DType::IQ2_XXS;
    case QuantMix::kIQ2_XS: return DType::IQ2_XS;
    case QuantMix::kIQ2_S: return DType::IQ2_XS;  // llama-quantize's IQ2_S file is mostly IQ2_XS
    case QuantMix::kIQ2_M: return DType::IQ2_S;
    case QuantMix::kIQ3_XXS: return DType::IQ3_XXS;
  }
  return DType::Q8_0;
}

namespace {

bool contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

// llama-quantize's use_more_bits: the first and last eighth and every third
// layer between.
bool more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

// Rows that do not fill the type's blocks take the nearest type whose blocks
// they fill, else F16.
DType fallback(DType t, int64_t ne0) {
  if (ne0 % dtype_info(t).block_size == 0) return t;
  switch (t) {
    case DType::IQ1_S:
    case DType::IQ1_M:
    case DType::IQ2_XXS:
    case DType::IQ2_XS:
    case DType::IQ2_S:
    case DType::IQ3_XXS:
    case DType::IQ3_S:
    case DType::IQ4_XS: t = DType::IQ4_NL; break;
    case DType::Q2_K:
    case DType::Q3_K: t = DType::Q4_0; break;
    case DType::Q4_K: t = DType::Q5_0; break;
    case DType::Q5_K: t = DType::Q5_1; break;
    case DType::Q6_K: t = DType::Q8_0; break;
    case DType::MXFP4: t = DType::Q8_0; break;
    default: break;
  }
  return ne0 % dtype_info(t).block_size == 0 ? t : DType::F16;
}

}  // namespace

std::optional<QuantMix> parse_quant_mix(std::string_view name) {
  for (QuantMix m : kMixes)
    if (name == quant_mix_name(m)) return m;
  return std::nullopt;
}

const char* quant_mix_name(QuantMix m) {
  switch (m) {
    case QuantMix::kQ8_0: return "q8_0";
    case QuantMix::kQ4_0: return "q4_0";
    case QuantMix::kQ2_K:
      return "q2_k";
    case QuantMix::kQ3_K_M:
      return "q3_k_m";
    case QuantMix::kQ4_K_M: return "q4_k_m";
    case QuantMix::kQ5_K_M: return "q5_k_m";
    case QuantMix::kQ6_K: return "q6_k";
    case QuantMix::kIQ4_NL: return "iq4_nl";
    case QuantMix::kIQ4_XS: return "iq4_xs";
    case QuantMix::kMXFP4_MOE: return "mxfp4_moe";
    case QuantMix::kIQ1_S: return "iq1_s";
    case QuantMix::kIQ1_M: return "iq1_m";
    case QuantMix::kIQ2_XXS: return "iq2_xxs";
    case QuantMix::kIQ2_XS: return "iq2_xs";
    case QuantMix::kIQ2_S: return "iq2_s";
    case QuantMix::kIQ2_M: return "iq2_m";
    case QuantMix::kIQ3_XXS: return "iq3_xxs";
  }
  return "?";
}

uint32_t quant_mix_file_type(QuantMix m) {
  switch (m) {
    case QuantMix::kQ8_0: return 7;
    case QuantMix::kQ4_0: return 2;
    case QuantMix::kQ2_K:
      return 10;
    case QuantMix::kQ3_K_M:
      return 12;
    case QuantMix::kQ4_K_M: return 15;
    case QuantMix::kQ5_K_M: return 17;
    case QuantMix::kQ6_K: return 18;
    case QuantMix::kIQ4_NL: return 25;
    case QuantMix::kIQ4_XS: return 30;
    case QuantMix::kMXFP4_MOE: return 38;
    case QuantMix::kIQ2_XXS: return 19;
    case QuantMix::kIQ2_XS: return 20;
    case QuantMix::kIQ3_XXS: return 23;
    case QuantMix::kIQ1_S: return 24;
    case QuantMix::kIQ2_S: return 28;
    case QuantMix::kIQ2_M: return 29;
    case QuantMix::kIQ1_M: return 31;
  }
  return 0;
}

namespace {

// The 1-2 bit file types: attn_v, the first eighth's ffn_down and attn_output
// get more bits.
DType low_bit_type(QuantMix m, const QuantMixModel& model, std::string_view name, int layer, DType type) {
  const bool s_m = m == QuantMix::kIQ2_S || m == QuantMix::kIQ2_M;
  if (name == "token_embd.weight") return s_m ? DType::IQ3_S : DType::Q2_K;
  if (contains(name, "attn_qkv.weight") || contains(name, "attn_kv_b.weight") || contains(name, "attn_v.weight")) {
    if (model.n_gqa >= 4 || model.n_expert >= 4) return DType::Q4_K;
    return s_m ? DType::IQ3_S : DType::Q2_K;
  }
  if (contains(name, "attn_k.weight")) return model.n_expert == 8 ? DType::Q4_K : type;
  if (contains(name, "ffn_down")) {
    // (llama-quantize counts ffn_down tensors, not layers: the same where a
    // layer has one)
    if (layer < model.n_layer_all / 8) return s_m ? DType::IQ3_S : DType::Q2_K;
    return type;
  }
  if (contains(name, "attn_output.weight")) {
    if (model.n_expert == 8) return DType::Q5_K;
    if (m == QuantMix::kIQ1_S || m == QuantMix::kIQ1_M) return DType::IQ2_XXS;
    if (s_m) return DType::IQ3_S;
  }
  return type;
}

// IQ3_XXS with an importance matrix.
DType iq3_xxs_type(const QuantMixModel& model, std::string_view name, DType type) {
  if (name == "token_embd.weight") return DType::IQ3_S;
  if (contains(name, "attn_qkv.weight") || contains(name, "attn_kv_b.weight") || contains(name, "attn_v.weight"))
    return model.n_expert == 8 ? DType::Q8_0 : model.n_gqa >= 4 ? DType::Q4_K : type;
  if (contains(name, "attn_k.weight")) return model.n_expert == 8 ? DType::Q8_0 : DType::IQ2_S;
  if (contains(name, "attn_q.weight")) return DType::IQ2_S;
  if (contains(name, "attn_output.weight")) return model.n_expert == 8 ? DType::Q5_K : DType::IQ3_S;
  return type;
}

bool low_bit(QuantMix m) {
  return m == QuantMix::kIQ1_S || m == QuantMix::kIQ1_M || m == QuantMix::kIQ2_XXS || m == QuantMix::kIQ2_XS ||
         m == QuantMix::kIQ2_S || m == QuantMix::kIQ2_M;
}

}  // namespace

DType quant_mix_type(QuantMix m, const QuantMixModel& model, std::string_view name, int64_t ne0, int64_t ne2,
                     int layer) {
  const DType base = quant_mix_base(m);
  const bool k_m = m == QuantMix::kQ4_K_M || m == QuantMix::kQ5_K_M;
  const bool iq4 = m == QuantMix::kIQ4_NL || m == QuantMix::kIQ4_XS;
  DType type = base;
  if (name == "output.weight" || (!model.has_output && name == "token_embd.weight")) {
    if (m == QuantMix::kMXFP4_MOE || ne0 % dtype_info(base).block_size != 0) type = DType::Q8_0;
    else if (low_bit(m) || m == QuantMix::kIQ3_XXS) type = DType::Q5_K;
    else if (base != DType::Q8_0) type = DType::Q6_K;
  } else if (low_bit(m)) {
    type = low_bit_type(m, model, name, layer, base);
  } else if (m == QuantMix::kIQ3_XXS) {
    type = iq3_xxs_type(model, name, base);
  } else if (m == QuantMix::kMXFP4_MOE) {
    type = ne2 > 1 ? DType::MXFP4 : DType::Q8_0;
  } else if (name == "token_embd.weight") {
    // the file's type
  } else if (contains(name, "attn_qkv.weight") || contains(name, "attn_kv_b.weight") ||
             contains(name, "attn_v.weight")) {
    if (m == QuantMix::kQ2_K)
      type = model.n_gqa >= 4 ? DType::Q4_K : DType::Q3_K;
    else if (m == QuantMix::kQ3_K_M)
      type = layer < 2 ? DType::Q5_K : DType::Q4_K;
    else if (iq4 && model.n_gqa >= 4)
      type = DType::Q5_K;
    else if (k_m && more_bits(layer, model.n_attn_v)) type = DType::Q6_K;
    if (model.n_expert == 8) type = DType::Q8_0;
  } else if (contains(name, "attn_k.weight")) {
    if (model.n_expert == 8) type = DType::Q8_0;
  } else if (contains(name, "attn_q.weight")) {
    // the file's type
  } else if (contains(name, "attn_output.weight")) {
    const bool k_low = m == QuantMix::kQ2_K || m == QuantMix::kQ3_K_M;
    if (model.n_expert == 8) {
      if (m == QuantMix::kQ4_K_M || iq4 || k_low) type = DType::Q5_K;
    } else if (k_low) {
      type = m == QuantMix::kQ2_K ? DType::Q3_K : DType::Q4_K;
    }
  } else if (contains(name, "ffn_up") || contains(name, "ffn_gate")) {
    // the file's type
  } else if (contains(name, "ffn_down")) {
    if (m == QuantMix::kQ2_K)
      type = DType::Q3_K;
    else if (m == QuantMix::kQ3_K_M)
      type = layer < model.n_layer_all / 16 ? DType::Q5_K : DType::Q4_K;
    else if (k_m && more_bits(layer, model.n_layer_all))
      type = DType::Q6_K;
    else if (iq4 && layer < model.n_layer_all / 8) type = DType::Q5_K;
  }
  return fallback(type, ne0);
}

}  // namespace colibri
