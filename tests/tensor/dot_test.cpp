// Dot kernels of every weight type and ISA against F64 oracles: the dot of the
// dequantized weights with the dequantized activations (float rounding only),
// and the dot with the original F32 activations (bounded by the activation
// quantization error).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "tensor/kernels/dispatch.h"
#include "tensor_test_util.h"

namespace colibri {
namespace {

using testing::kWeightTypes;
using testing::Oracle;
using testing::Scales;

std::vector<Isa> isas() {
  std::vector<Isa> v;
  for (Isa i : kAllIsas)
    if (isa_supported(i)) v.push_back(i);
  return v;
}

std::vector<uint8_t> quantize_for(DType w, const std::vector<float>& x) {
  const DType a = activation_type(w, Precision::kNative);
  std::vector<uint8_t> q(row_bytes(a, static_cast<int64_t>(x.size())));
  ref_kernel_table().quantize[slot(a)](x.data(), q.data(), static_cast<int64_t>(x.size()));
  return q;
}

void check_against_oracle(Isa isa, DType t, int64_t n, Scales s, bool all_max, std::mt19937& rng) {
  const auto w = testing::random_weights(t, n, rng, s, all_max);
  const auto x = testing::random_activations(n, rng, s == Scales::kLarge ? 100.0f : 1.0f);
  const auto xq = quantize_for(t, x);
  const DType at = activation_type(t, Precision::kNative);
  const Oracle o = testing::oracle_dot(t, w.data(), at, xq.data(), n);
  const float got = kernel_table(isa).dot[slot(t)](w.data(), xq.data(), n);
  ASSERT_TRUE(std::isfinite(got)) << isa_name(isa) << " " << dtype_name(t) << " n=" << n;
  // F16/BF16 activations are rounded to 11/8 bits before the F32 products.
  ASSERT_NEAR(got, o.value, o.tolerance())
      << isa_name(isa) << " " << dtype_name(t) << " n=" << n << (all_max ? " all-max" : "");
}

TEST(Dot, EveryTypeAndIsaMatchesF64Oracle) {
  std::mt19937 rng(21);
  for (Isa isa : isas()) {
    for (DType t : kWeightTypes) {
      const int64_t bs = std::max<int64_t>(dtype_info(t).block_size, 32);
      for (int64_t blocks : {1, 2, 3, 7, 16, 33}) {
        check_against_oracle(isa, t, blocks * bs, Scales::kTypical, false, rng);
        check_against_oracle(isa, t, blocks * bs, Scales::kLarge, false, rng);
      }
      check_against_oracle(isa, t, 8 * bs, Scales::kTypical, true, rng);
      check_against_oracle(isa, t, 8 * bs, Scales::kLarge, true, rng);
    }
  }
}

// Activations at the ends of their integer range: a block of equal values
// quantizes to all -127 (q8_K) or +-127 (q8_0), so block sums reach their
// extremes (16 x -127 per q8_K sub-block), with weights at their largest
// codes or random.
TEST(Dot, ExtremeActivationsMatchF64Oracle) {
  std::mt19937 rng(25);
  for (Isa isa : isas())
    for (DType t : kWeightTypes) {
      const DType at = activation_type(t, Precision::kNative);
      const int64_t n = 4 * std::max<int64_t>(dtype_info(t).block_size, 256);
      for (float v : {-3.0f, 3.0f})
        for (bool all_max : {false, true}) {
          const auto w = testing::random_weights(t, n, rng, Scales::kTypical, all_max);
          std::vector<float> x(static_cast<size_t>(n), v);
          for (int64_t i = n / 2; i < n; i += 2) x[static_cast<size_t>(i)] = -v;  // mixed signs later on
          const auto xq = quantize_for(t, x);
          const Oracle o = testing::oracle_dot(t, w.data(), at, xq.data(), n);
          const float got = kernel_table(isa).dot[slot(t)](w.data(), xq.data(), n);
          ASSERT_NEAR(got, o.value, o.tolerance())
              << isa_name(isa) << " " << dtype_name(t) << " x=" << v << (all_max ? " all-max" : "");
        }
    }
}

// Row lengths that are not multiples of the SIMD width in elements (float
// types) exercise the tails.
TEST(Dot, FloatTypesOddLengths) {
  std::mt19937 rng(22);
  for (Isa isa : isas())
    for (DType t : {DType::F32, DType::F16, DType::BF16})
      for (int64_t n : {1, 3, 15, 17, 31, 33, 63, 65, 100, 257})
        check_against_oracle(isa, t, n, Scales::kTypical, false, rng);
}

// The dot against the unquantized activations differs from the exact F64 dot
// by at most sum_b (sum_{i in b} |w_i|) * (step_b / 2 + fp16 slack): each
// activation moves by at most half its block's quantization step.
TEST(Dot, BoundedByActivationQuantizationError) {
  std::mt19937 rng(23);
  for (DType t : kWeightTypes) {
    const DType at = activation_type(t, Precision::kNative);
    const int64_t n = 2048;
    const auto w = testing::random_weights(t, n, rng);
    const auto x = testing::random_activations(n, rng);
    const auto xq = quantize_for(t, x);
    const auto wd = testing::dequantized(t, w.data(), n);
    double exact = 0, bound = 0, abs_sum = 0;
    for (int64_t i = 0; i < n; ++i) {
      exact += static_cast<double>(wd[i]) * x[i];
      abs_sum += std::fabs(static_cast<double>(wd[i]) * x[i]);
    }
    const int64_t abs_bs = at == DType::Q8_K ? 256 : 32;
    if (at == DType::F16 || at == DType::BF16) {
      bound = abs_sum * (at == DType::F16 ? 0x1p-11 : 0x1p-8);
    } else if (at != DType::F32) {
      for (int64_t b = 0; b < n / abs_bs; ++b) {
        double wsum = 0, amax = 0;
        for (int64_t j = b * abs_bs; j < (b + 1) * abs_bs; ++j) {
          wsum += std::fabs(wd[j]);
          amax = std::fmax(amax, std::fabs(x[j]));
        }
        bound += wsum * amax / 127 * (0.5 + 127.0 / 1024);
      }
    }
    bound += 1e-5 * abs_sum + 1.01 * testing::oracle_dot(t, w.data(), at, xq.data(), n).s_rounding;
    for (Isa isa : isas()) {
      const float got = kernel_table(isa).dot[slot(t)](w.data(), xq.data(), n);
      EXPECT_NEAR(got, exact, bound) << isa_name(isa) << " " << dtype_name(t);
    }
  }
}

// Each ISA against the scalar kernel on the same inputs; their integer block
// sums are identical, so only the float summation order differs.
TEST(Dot, EveryIsaMatchesScalar) {
  std::mt19937 rng(24);
  for (Isa isa : isas()) {
    if (isa == Isa::kScalar) continue;
    for (DType t : kWeightTypes) {
      const DType at = activation_type(t, Precision::kNative);
      const int64_t bs = std::max<int64_t>(dtype_info(t).block_size, 32);
      for (int64_t blocks = 1; blocks <= 12; ++blocks) {
        const int64_t n = blocks * bs;
        const auto w = testing::random_weights(t, n, rng);
        const auto xq = quantize_for(t, testing::random_activations(n, rng));
        const Oracle o = testing::oracle_dot(t, w.data(), at, xq.data(), n);
        const float a = ref_kernel_table().dot[slot(t)](w.data(), xq.data(), n);
        const float b = kernel_table(isa).dot[slot(t)](w.data(), xq.data(), n);
        ASSERT_NEAR(a, b, 1e-5 * o.abs_sum + 1e-30) << isa_name(isa) << " " << dtype_name(t) << " n=" << n;
      }
    }
  }
}

}  // namespace
}  // namespace colibri
