#include "tensor/dtype.h"

#include "base/error.h"

namespace colibri {

namespace {

// Block sizes in bytes are those of ggml's block structs (static_asserted in
// tensor/quant_blocks.h).
constexpr DTypeInfo kInfos[] = {
    {DType::F32, "f32", 1, 4, true},
    {DType::F16, "f16", 1, 2, true},
    {DType::Q4_0, "q4_0", 32, 18, true},
    {DType::Q4_1, "q4_1", 32, 20, true},
    {DType::Q5_0, "q5_0", 32, 22, true},
    {DType::Q5_1, "q5_1", 32, 24, true},
    {DType::Q8_0, "q8_0", 32, 34, true},
    {DType::Q8_1, "q8_1", 32, 36, false},
    {DType::Q2_K, "q2_K", 256, 84, true},
    {DType::Q3_K, "q3_K", 256, 110, true},
    {DType::Q4_K, "q4_K", 256, 144, true},
    {DType::Q5_K, "q5_K", 256, 176, true},
    {DType::Q6_K, "q6_K", 256, 210, true},
    {DType::Q8_K, "q8_K", 256, 292, false},
    {DType::IQ2_XXS, "iq2_xxs", 256, 66, true},
    {DType::IQ2_XS, "iq2_xs", 256, 74, true},
    {DType::IQ3_XXS, "iq3_xxs", 256, 98, true},
    {DType::IQ1_S, "iq1_s", 256, 50, true},
    {DType::IQ4_NL, "iq4_nl", 32, 18, true},
    {DType::IQ3_S, "iq3_s", 256, 110, true},
    {DType::IQ2_S, "iq2_s", 256, 82, true},
    {DType::IQ4_XS, "iq4_xs", 256, 136, true},
    {DType::IQ1_M, "iq1_m", 256, 56, true},
    {DType::BF16, "bf16", 1, 2, true},
    {DType::MXFP4, "mxfp4", 32, 17, true},
};

}  // namespace

const DTypeInfo* dtype_info(uint32_t raw_id) {
  for (const auto& i : kInfos)
    if (static_cast<uint32_t>(i.type) == raw_id) return &i;
  return nullptr;
}

const DTypeInfo& dtype_info(DType t) {
  const DTypeInfo* i = dtype_info(static_cast<uint32_t>(t));
  CLB_ASSERT(i != nullptr);
  return *i;
}

size_t row_bytes(DType t, int64_t n) {
  const DTypeInfo& i = dtype_info(t);
  CLB_ASSERT(n % i.block_size == 0);
  return static_cast<size_t>(n / i.block_size) * i.block_bytes;
}

}  // namespace colibri
