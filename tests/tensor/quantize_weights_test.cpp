// Reference weight quantizers: quantize -> dequantize error bounds that follow
// from each format (half a step, one step where the top code is clamped, plus
// the fp16 rounding of d and m), and a clear error for types without one.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "base/error.h"
#include "tensor_test_util.h"

namespace colibri {
namespace {

struct Case {
  DType type;
  bool has_min;  // q = round((x - min) / d), else q = round(x / d) + offset
  int levels;    // 16 or 32
};

TEST(QuantizeWeights, RoundTripBounds) {
  std::mt19937 rng(41);
  for (Case c : {Case{DType::Q4_0, false, 16}, Case{DType::Q4_1, true, 16}, Case{DType::Q5_0, false, 32},
                 Case{DType::Q5_1, true, 32}, Case{DType::Q8_0, false, 255}}) {
    const int64_t n = 4096;
    std::vector<float> x = testing::random_activations(n, rng, 0.05f);
    for (int j = 0; j < 32; ++j) x[j] = 0.0f;  // an all-zero block
    x[100] = 3.0f;                             // an outlier block
    std::vector<uint8_t> q(row_bytes(c.type, n));
    quantize_weights(c.type, x.data(), q.data(), n);
    const std::vector<float> y = testing::dequantized(c.type, q.data(), n);
    for (int64_t b = 0; b < n / 32; ++b) {
      float lo = x[b * 32], hi = lo, amax = 0;
      for (int j = 0; j < 32; ++j) {
        lo = std::fmin(lo, x[b * 32 + j]);
        hi = std::fmax(hi, x[b * 32 + j]);
        amax = std::fmax(amax, std::fabs(x[b * 32 + j]));
      }
      // The step: (max - min) / (levels - 1) with a min, else amax / (levels / 2)
      // (q8_0: amax / 127). Symmetric types clamp the code opposite the
      // largest magnitude, which can cost a whole step.
      const double step = c.has_min ? (hi - lo) / (c.levels - 1.0)
                                    : amax / (c.type == DType::Q8_0 ? 127.0 : c.levels / 2.0);
      const double slack = (c.levels + 1) * step * 0x1p-11 + (c.has_min ? std::fabs(lo) * 0x1p-11 : 0.0);
      const double bound = (c.has_min || c.type == DType::Q8_0 ? 0.5 : 1.0) * step * (1 + 1e-6) + slack + 1e-30;
      for (int j = 0; j < 32; ++j) {
        const int64_t i = b * 32 + j;
        ASSERT_LE(std::fabs(static_cast<double>(x[i]) - y[i]), bound) << dtype_name(c.type) << " element " << i;
      }
    }
  }
}

TEST(QuantizeWeights, FloatTypesAreConversions) {
  const float x[4] = {1.0f, -0.1f, 65504.0f, 1e-8f};
  uint16_t h[4];
  quantize_weights(DType::F16, x, h, 4);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(h[i], fp32_to_fp16(x[i]));
  quantize_weights(DType::BF16, x, h, 4);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(h[i], fp32_to_bf16(x[i]));
}

TEST(QuantizeWeights, TypesWithoutOneReportIt) {
  std::vector<float> x(256, 1.0f);
  std::vector<uint8_t> q(row_bytes(DType::IQ2_XXS, 256));
  EXPECT_THROW(quantize_weights(DType::IQ2_XXS, x.data(), q.data(), 256), Error);
}

// The searching quantizers (K-quants, IQ4; golden_test checks their bytes
// against llama-quantize's) on Gaussian weights: each is nearer the weights
// than the plain type of as many bits, and more bits are nearer.
TEST(QuantizeWeights, SearchingQuantizersBeatPlainOnes) {
  std::mt19937 rng(7);
  std::normal_distribution<float> g(0.0f, 0.02f);
  const int64_t n = 256 * 64;
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = g(rng);
  auto rmse = [&](DType t) {
    std::vector<uint8_t> q(row_bytes(t, n));
    quantize_weights(t, x.data(), q.data(), n);
    const std::vector<float> y = testing::dequantized(t, q.data(), n);
    double e = 0;
    for (int64_t i = 0; i < n; ++i) e += (double(x[i]) - y[i]) * (double(x[i]) - y[i]);
    return std::sqrt(e / n) / 0.02;
  };
  const double q4_0 = rmse(DType::Q4_0), q5_0 = rmse(DType::Q5_0), q8_0 = rmse(DType::Q8_0);
  const double q2_k = rmse(DType::Q2_K), q3_k = rmse(DType::Q3_K);
  const double q4_k = rmse(DType::Q4_K), q5_k = rmse(DType::Q5_K), q6_k = rmse(DType::Q6_K);
  const double iq4_nl = rmse(DType::IQ4_NL), iq4_xs = rmse(DType::IQ4_XS);
  EXPECT_LT(q3_k, q2_k);
  EXPECT_LT(q4_k, q3_k);
  EXPECT_LT(q2_k, 0.6);  // about 0.4 for 2-bit codes with 4-bit scales and mins
  EXPECT_LT(q4_k, q4_0);
  EXPECT_LT(iq4_nl, q4_0);
  EXPECT_LT(iq4_xs, q4_0);
  EXPECT_LT(q5_k, q5_0);
  EXPECT_LT(q5_k, q4_k);
  EXPECT_LT(q6_k, q5_k);
  EXPECT_LT(q8_0, q6_k);
  EXPECT_LT(q4_0, 0.15);  // about 0.1 for 4 bits on Gaussian data
}

// A checkpoint's NaN, infinities, huge and tiny values (convert reads them
// untrusted): every quantizer ends and writes blocks that dequantize, and a
// block of finite ordinary values next to them is unaffected.
TEST(QuantizeWeights, NonFiniteInputStaysInItsBlock) {
  const int64_t n = 512;
  std::vector<float> x(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) x[i] = 0.01f * static_cast<float>((i * 37) % 19 - 9);
  const float odd[] = {NAN, INFINITY, -INFINITY, 3e38f, -3e38f, 1e-40f};
  for (int i = 0; i < 6; ++i) x[static_cast<size_t>(40 * i)] = odd[i];
  for (DType t :
       {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::MXFP4, DType::Q2_K,
        DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_NL, DType::IQ4_XS}) {
    std::vector<uint8_t> q(row_bytes(t, n));
    quantize_weights(t, x.data(), q.data(), n);
    const std::vector<float> y = testing::dequantized(t, q.data(), n);
    // The second super-block (elements 256..511) holds only ordinary values
    // (-0.09..0.09: within half a step, which for Q2_K's four codes is 0.03
    // and its rounded 4-bit scale and min).
    const float tol = t == DType::Q2_K ? 0.045f : 0.02f;
    for (int64_t i = 256; i < n; ++i)
      EXPECT_NEAR(y[i], x[i], tol) << dtype_name(t) << " element " << i;
  }
}

}  // namespace
}  // namespace colibri
