// Activation quantizers: quantize -> dequantize error bounds, the q8_1 and
// q8_K side fields, and each ISA's quantizer bit-equal to the scalar one.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "tensor/kernels/dispatch.h"
#include "tensor_test_util.h"

namespace colibri {
namespace {

using testing::random_activations;

// Rows with a zero block, a block with one huge element, and random blocks.
std::vector<float> tricky_row(int64_t n, std::mt19937& rng) {
  std::vector<float> x = random_activations(n, rng, 3.0f);
  for (int i = 0; i < 256 && i < n; ++i) x[i] = 0.0f;
  if (n >= 512) x[300] = -1e4f;
  return x;
}

// Per block of bs elements, |x - dequant(quant(x))| <= d / 2 where d is the
// block's step amax / 127, plus the effect of storing d as fp16 (relative
// 2^-11 on up to 127 steps) where the type does.
void check_round_trip(DType t, int bs, bool fp16_scale) {
  std::mt19937 rng(11);
  for (int64_t n : {256, 512, 2048}) {
    const std::vector<float> x = tricky_row(n, rng);
    std::vector<uint8_t> q(row_bytes(t, n));
    ref_kernel_table().quantize[slot(t)](x.data(), q.data(), n);
    const std::vector<float> y = testing::dequantized(t, q.data(), n);
    for (int64_t b = 0; b < n / bs; ++b) {
      float amax = 0;
      for (int j = 0; j < bs; ++j) amax = std::fmax(amax, std::fabs(x[b * bs + j]));
      const double step = amax / 127.0;
      const double bound = step * (0.5 + (fp16_scale ? 127.0 / 2048 : 1e-5)) + 1e-30;
      for (int j = 0; j < bs; ++j) {
        const int64_t i = b * bs + j;
        ASSERT_LE(std::fabs(static_cast<double>(x[i]) - y[i]), bound)
            << dtype_name(t) << " n=" << n << " element " << i << " x=" << x[i] << " y=" << y[i];
      }
    }
  }
}

TEST(Quantize, Q8_0RoundTrip) { check_round_trip(DType::Q8_0, 32, true); }
TEST(Quantize, Q8_1RoundTrip) { check_round_trip(DType::Q8_1, 32, true); }
TEST(Quantize, Q8_KRoundTrip) { check_round_trip(DType::Q8_K, 256, false); }

TEST(Quantize, Q8_1SumField) {
  std::mt19937 rng(12);
  const std::vector<float> x = random_activations(256, rng);
  std::vector<block_q8_1> q(8);
  ref_kernel_table().quantize[slot(DType::Q8_1)](x.data(), q.data(), 256);
  for (const auto& b : q) {
    int sum = 0;
    for (int8_t v : b.qs) sum += v;
    // s = fp16(d32 * sum) where d32 is the unrounded step; fp16(d) is within
    // 2^-11 of it, so s / (fp16(d) * sum) is within about 2^-10 of 1.
    if (sum != 0) {
      EXPECT_NEAR(half_to_float(b.s) / (half_to_float(b.d) * sum), 1.0, 1e-3);
    }
  }
}

TEST(Quantize, Q8_KSideFields) {
  std::mt19937 rng(13);
  const std::vector<float> x = tricky_row(1024, rng);
  std::vector<block_q8_K> q(4);
  ref_kernel_table().quantize[slot(DType::Q8_K)](x.data(), q.data(), 1024);
  EXPECT_EQ(q[0].d, 0.0f);  // the all-zero block
  for (int b = 0; b < 4; ++b) {
    for (int j = 0; j < 16; ++j) {
      int sum = 0;
      for (int l = 0; l < 16; ++l) sum += q[b].qs[16 * j + l];
      EXPECT_EQ(q[b].bsums[j], sum);
    }
  }
  // The element of largest magnitude always maps to -127 (scale -127 / max).
  EXPECT_EQ(q[1].qs[300 - 256], -127);
}

TEST(Quantize, RoundsHalfAwayFromZeroLikeRoundf) {
  // amax 127 gives d = 1 exactly, so x * id = x and ties are visible.
  std::vector<float> x(32, 0.0f);
  x[0] = 127.0f;
  x[1] = 2.5f;
  x[2] = -2.5f;
  x[3] = 0.5f;
  x[4] = -0.49999997f;
  block_q8_0 b;
  ref_kernel_table().quantize[slot(DType::Q8_0)](x.data(), &b, 32);
  EXPECT_EQ(b.d, 0x3C00);
  EXPECT_EQ(b.qs[0], 127);
  EXPECT_EQ(b.qs[1], 3);
  EXPECT_EQ(b.qs[2], -3);
  EXPECT_EQ(b.qs[3], 1);
  EXPECT_EQ(b.qs[4], 0);
}

TEST(Quantize, EveryIsaMatchesScalarBitForBit) {
  std::mt19937 rng(14);
  for (Isa isa : {Isa::kAvx2, Isa::kAvx512, Isa::kNeon, Isa::kNeonDot, Isa::kNeonI8mm}) {
    if (!isa_supported(isa)) continue;
    const KernelTable& k = kernel_table(isa);
    for (DType t : {DType::F16, DType::BF16, DType::Q8_0, DType::Q8_1, DType::Q8_K}) {
      for (int64_t n : {256, 768, 4096}) {
        std::vector<float> x = tricky_row(n, rng);
        // Exact ties after scaling: a block whose amax is 127 has step 1.
        // (In the last block, so rows of one block get them too.)
        const int64_t at = n - 256;
        x[at] = 127.0f;
        x[at + 1] = 2.5f;
        x[at + 2] = -0.5f;
        x[at + 3] = 1e-40f;  // F32 subnormal
        std::vector<uint8_t> a(row_bytes(t, n)), b(row_bytes(t, n));
        ref_kernel_table().quantize[slot(t)](x.data(), a.data(), n);
        k.quantize[slot(t)](x.data(), b.data(), n);
        ASSERT_EQ(a, b) << isa_name(isa) << " " << dtype_name(t) << " n=" << n;
      }
    }
  }
}

}  // namespace
}  // namespace colibri
