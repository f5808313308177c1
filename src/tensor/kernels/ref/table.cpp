// The type traits and the scalar kernel table: one entry per type.
#include "base/error.h"
#include "tensor/kernels/kernel_table.h"
#include "tensor/kernels/ref/ref.h"

namespace colibri {

namespace {

struct TraitsRow {
  DType type;
  DequantizeFn dequantize;
  DType vec_dot_type;
  DotFn dot;            // null for activation-only types
  QuantizeFn from_f32;  // activation quantizer; null for weight-only types
  QuantizeFn weights;   // weight quantizer; null where none is written
};

// vec_dot_type is ggml's type_traits_cpu[].vec_dot_type for each weight type.
constexpr TraitsRow kRows[] = {
    {DType::F32, ref::dequantize_f32, DType::F32, ref::dot_f32, ref::quantize_f32,
     ref::quantize_f32},
    {DType::F16, ref::dequantize_f16, DType::F16, ref::dot_f16, ref::quantize_f16,
     ref::quantize_f16},
    {DType::BF16, ref::dequantize_bf16, DType::BF16, ref::dot_bf16, ref::quantize_bf16,
     ref::quantize_bf16},
    {DType::Q4_0, ref::dequantize_q4_0, DType::Q8_0, ref::dot_q4_0, nullptr,
     ref::quantize_weights_q4_0},
    {DType::Q4_1, ref::dequantize_q4_1, DType::Q8_1, ref::dot_q4_1, nullptr,
     ref::quantize_weights_q4_1},
    {DType::Q5_0, ref::dequantize_q5_0, DType::Q8_0, ref::dot_q5_0, nullptr,
     ref::quantize_weights_q5_0},
    {DType::Q5_1, ref::dequantize_q5_1, DType::Q8_1, ref::dot_q5_1, nullptr,
     ref::quantize_weights_q5_1},
    {DType::Q8_0, ref::dequantize_q8_0, DType::Q8_0, ref::dot_q8_0, ref::quantize_q8_0,
     ref::quantize_q8_0},
    {DType::Q8_1, ref::dequantize_q8_1, DType::Q8_1, nullptr, ref::quantize_q8_1, nullptr},
    {DType::Q2_K, ref::dequantize_q2_K, DType::Q8_K, ref::dot_q2_K, nullptr,
     ref::quantize_weights_q2_K},
    {DType::Q3_K, ref::dequantize_q3_K, DType::Q8_K, ref::dot_q3_K, nullptr,
     ref::quantize_weights_q3_K},
    {DType::Q4_K, ref::dequantize_q4_K, DType::Q8_K, ref::dot_q4_K, nullptr,
     ref::quantize_weights_q4_K},
    {DType::Q5_K, ref::dequantize_q5_K, DType::Q8_K, ref::dot_q5_K, nullptr,
     ref::quantize_weights_q5_K},
    {DType::Q6_K, ref::dequantize_q6_K, DType::Q8_K, ref::dot_q6_K, nullptr,
     ref::quantize_weights_q6_K},
    {DType::Q8_K, ref::dequantize_q8_K, DType::Q8_K, nullptr, ref::quantize_q8_K, nullptr},
    {DType::MXFP4, ref::dequantize_mxfp4, DType::Q8_0, ref::dot_mxfp4, nullptr,
     ref::quantize_weights_mxfp4},
    {DType::IQ4_NL, ref::dequantize_iq4_nl, DType::Q8_0, ref::dot_iq4_nl, nullptr,
     ref::quantize_weights_iq4_nl},
    {DType::IQ4_XS, ref::dequantize_iq4_xs, DType::Q8_K, ref::dot_iq4_xs, nullptr,
     ref::quantize_weights_iq4_xs},
    {DType::IQ2_XXS, ref::dequantize_iq2_xxs, DType::Q8_K, ref::dot_iq2_xxs, nullptr, nullptr},
    {DType::IQ2_XS, ref::dequantize_iq2_xs, DType::Q8_K, ref::dot_iq2_xs, nullptr, nullptr},
    {DType::IQ2_S, ref::dequantize_iq2_s, DType::Q8_K, ref::dot_iq2_s, nullptr, nullptr},
    {DType::IQ3_XXS, ref::dequantize_iq3_xxs, DType::Q8_K, ref::dot_iq3_xxs, nullptr, nullptr},
    {DType::IQ3_S, ref::dequantize_iq3_s, DType::Q8_K, ref::dot_iq3_s, nullptr, nullptr},
    {DType::IQ1_S, ref::dequantize_iq1_s, DType::Q8_K, ref::dot_iq1_s, nullptr, nullptr},
    {DType::IQ1_M, ref::dequantize_iq1_m, DType::Q8_K, ref::dot_iq1_m, nullptr, nullptr},
};

struct Tables {
  TypeTraits traits[kTypeSlots];
  KernelTable ref;
  Tables() {
    for (const TraitsRow& r : kRows) {
      traits[slot(r.type)] = {r.dequantize, r.vec_dot_type, r.weights, nullptr, nullptr, nullptr};
      ref.dot[slot(r.type)] = r.dot;
      ref.quantize[slot(r.type)] = r.from_f32;
    }
    traits[slot(DType::Q4_0)].pack_group = ref::pack_group_q4_0;
    traits[slot(DType::Q4_0)].unpack_row = ref::unpack_row_q4_0;
    traits[slot(DType::Q4_0)].packed_ref = ref::packed_q4_0;
    traits[slot(DType::Q8_0)].pack_group = ref::pack_group_q8_0;
    traits[slot(DType::Q8_0)].unpack_row = ref::unpack_row_q8_0;
    traits[slot(DType::Q8_0)].packed_ref = ref::packed_q8_0;
    traits[slot(DType::MXFP4)].pack_group = ref::pack_group_mxfp4;
    traits[slot(DType::MXFP4)].unpack_row = ref::unpack_row_mxfp4;
    traits[slot(DType::MXFP4)].packed_ref = ref::packed_mxfp4;
    traits[slot(DType::Q5_0)].pack_group = ref::pack_group_q5_0;
    traits[slot(DType::Q5_0)].unpack_row = ref::unpack_row_q5_0;
    traits[slot(DType::Q5_0)].packed_ref = ref::packed_q5_0;
    traits[slot(DType::Q4_K)].pack_group = ref::pack_group_q4_K;
    traits[slot(DType::Q4_K)].unpack_row = ref::unpack_row_q4_K;
    traits[slot(DType::Q4_K)].packed_ref = ref::packed_q4_K;
    traits[slot(DType::Q6_K)].pack_group = ref::pack_group_q6_K;
    traits[slot(DType::Q6_K)].unpack_row = ref::unpack_row_q6_K;
    traits[slot(DType::Q6_K)].packed_ref = ref::packed_q6_K;
    traits[slot(DType::IQ4_XS)].pack_group = ref::pack_group_iq4_xs;
    traits[slot(DType::IQ4_XS)].unpack_row = ref::unpack_row_iq4_xs;
    traits[slot(DType::IQ4_XS)].packed_ref = ref::packed_iq4_xs;
    ref.attend = ref::attend<float>;
    ref.attend_batch = ref::attend_batch<float>;
    ref.attend_f16 = ref::attend<uint16_t>;
    ref.attend_batch_f16 = ref::attend_batch<uint16_t>;
    ref.attend_q8_0 = ref::attend<block_q8_0>;
    ref.attend_batch_q8_0 = ref::attend_batch<block_q8_0>;
    ref.attend_q4_0 = ref::attend<block_q4_0>;
    ref.attend_batch_q4_0 = ref::attend_batch<block_q4_0>;
    ref.silu_mul = ref::silu_mul;
    ref.swiglu_clamped = ref::swiglu_clamped;
    ref.rms_norm = ref::rms_norm;
    ref.read_sum = ref::read_sum;
    ref.int8_peak = ref::int8_peak;
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

const TypeTraits& type_traits(DType t) {
  const int s = slot(t);
  CLB_ASSERT(s >= 0 && s < kTypeSlots && tables().traits[s].dequantize != nullptr);
  return tables().traits[s];
}

const KernelTable& ref_kernel_table() {
  return tables().ref;
}

}  // namespace colibri
