// The type llama-quantize gives each tensor of a model for a file type
// (llama_tensor_get_type without an importance matrix or per-tensor
// overrides; for the IQ1-IQ3 file types, with one), for the files colibri
// writes: synth's random models and convert's quantized ones. Decided by the tensor's name as llama-quantize
// decides it: output.weight (or a tied token_embd) Q6_K, more bits for
// attn_v and ffn_down in some layers, Q8_0 attn_k/attn_v and Q5_K
// attn_output in 8-expert models, and the fallbacks for rows that do not fill
// a type's blocks.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "tensor/dtype.h"

namespace colibri {

enum class QuantMix {
  kQ8_0,
  kQ4_0,
  kQ2_K,
  kQ3_K_M,
  kQ4_K_M,
  kQ5_K_M,
  kQ6_K,
  kIQ4_NL,
  kIQ4_XS,
  kMXFP4_MOE,
  // The codebook i-quants, which llama-quantize writes only with an importance
  // matrix: their rules are the ones it applies with one.
  kIQ1_S,
  kIQ1_M,
  kIQ2_XXS,
  kIQ2_XS,
  kIQ2_S,
  kIQ2_M,
  kIQ3_XXS,
};

// "q4_k_m", "iq4_xs", ... as llama-quantize names them (lower case).
std::optional<QuantMix> parse_quant_mix(std::string_view name);
const char* quant_mix_name(QuantMix m);
// llama_ftype, written as general.file_type.
uint32_t quant_mix_file_type(QuantMix m);
// The type most tensors take (Q4_K for Q4_K_M, ...).
DType quant_mix_base(QuantMix m);

// What the rules read of the model.
struct QuantMixModel {
  int n_layer_all = 0;  // block_count, NextN layers included
  int n_expert = 0;
  int n_gqa = 1;        // query heads per KV head
  int n_attn_v = 0;     // attn_v tensors in the file
  bool has_output = true;  // false: token_embd doubles as the output (tied)
};

// The type of tensor `name` with rows of ne0 and ne2 experts (1 when not
// stacked); layer is its block (from "blk.N."), -1 for the global tensors,
// and stands for an attn_v's index among them (one a layer).
// For the tensors llama-quantize quantizes (2-D and 3-D weights other than
// norms and routers); the caller keeps the rest as they are.
DType quant_mix_type(QuantMix m, const QuantMixModel& model, std::string_view name, int64_t ne0, int64_t ne2,
                     int layer);

}  // namespace colibri
