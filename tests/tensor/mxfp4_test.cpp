// MXFP4 (OCP microscaling FP4, ggml type 39) against a decoder written here
// from the format's definition: 32 E2M1 values (1 sign, 2 exponent, 1
// mantissa bit: 0, .5, 1, 1.5, 2, 3, 4, 6) sharing one E8M0 scale 2^(e - 127).
// Decoding of every exponent and code, the weight quantizer (round trips,
// ties, degenerate blocks) and the scalar Q8_0 dot, exactly per block.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "tensor/half.h"
#include "tensor/kernels/kernel_table.h"
#include "tensor/ops.h"
#include "tensor/quant_blocks.h"

namespace colibri {
namespace {

// E2M1 magnitudes by the low three bits of a code (exponent bits 2..1,
// mantissa bit 0): subnormal 0 and 0.5, then (1 + m / 2) * 2^(exp - 1).
constexpr float kE2M1[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

// The spec's value of `code` under E8M0 exponent e, in float (exact: the
// magnitude has two significant bits and the scale is a power of two; the
// product overflows to infinity or is a float subnormal where it must be).
float spec_value(int code, int e) {
  const float v = std::ldexp(kE2M1[code & 7], e - 127);
  return code & 8 ? -v : v;
}

block_mxfp4 make_block(int e, const int (&codes)[32]) {
  block_mxfp4 b;
  b.e = static_cast<uint8_t>(e);
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(codes[j] | (codes[j + 16] << 4));
  return b;
}

TEST(Mxfp4, TypeTableEntry) {
  const DTypeInfo* info = dtype_info(39);
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(info->type, DType::MXFP4);
  EXPECT_STREQ(info->name, "mxfp4");
  EXPECT_EQ(info->block_size, 32);
  EXPECT_EQ(info->block_bytes, 17u);
  EXPECT_TRUE(info->weight);
  EXPECT_EQ(row_bytes(DType::MXFP4, 4096), 128u * 17);
  EXPECT_EQ(activation_type(DType::MXFP4, Precision::kNative), DType::Q8_0);
  EXPECT_EQ(activation_type(DType::MXFP4, Precision::kReference), DType::F32);
}

// Every exponent 0..255 with every code in both nibble positions: element j
// (< 16) from the low nibble of qs[j], element j + 16 from the high one.
TEST(Mxfp4, EveryExponentAndCodeDecodesToTheSpecValue) {
  for (int e = 0; e < 256; ++e) {
    int codes[32];
    for (int j = 0; j < 16; ++j) {
      codes[j] = j;
      codes[j + 16] = 15 - j;
    }
    const block_mxfp4 b = make_block(e, codes);
    float y[32];
    dequantize_row(DType::MXFP4, &b, y, 32);
    for (int j = 0; j < 32; ++j) {
      const float want = spec_value(codes[j], e);
      // == so that code 8 (the spec's -0) may decode as +0 (below).
      ASSERT_EQ(y[j], want) << "e=" << e << " code " << codes[j] << " element " << j;
      if (want != 0.0f) {
        ASSERT_EQ(f32_bits(y[j]), f32_bits(want)) << "e=" << e << " code " << codes[j];
      }
    }
  }
}

TEST(Mxfp4, ScaleIsExactlyHalfTheE8M0Scale) {
  for (int e = 0; e < 256; ++e) {
    const float d = e8m0_to_float_half(static_cast<uint8_t>(e));
    ASSERT_EQ(d, std::ldexp(1.0f, e - 128)) << e;
    ASSERT_TRUE(std::isfinite(d)) << e;
  }
  EXPECT_EQ(f32_bits(e8m0_to_float_half(0)), 0x00200000u);  // 2^-128, a float subnormal
  EXPECT_EQ(f32_bits(e8m0_to_float_half(1)), 0x00400000u);  // 2^-127
  EXPECT_EQ(f32_bits(e8m0_to_float_half(255)), 0x7F000000u);  // 2^127: E8M0's NaN code is a number here
}

// ggml's table holds 0 for both zero codes, so "-0" decodes as +0; and with
// e = 255 every value of magnitude >= 1 (E2M1 >= 1, i.e. 2 x 2^127) is
// infinite, smaller ones finite.
TEST(Mxfp4, NegativeZeroAndTheTopExponent) {
  int codes[32] = {};
  codes[0] = 8;
  codes[1] = 1;   // 0.5 * 2^128 = 2^127
  codes[2] = 2;   // 1 * 2^128: overflow
  codes[3] = 15;  // -6 * 2^128
  const block_mxfp4 b = make_block(255, codes);
  float y[32];
  dequantize_row(DType::MXFP4, &b, y, 32);
  EXPECT_EQ(f32_bits(y[0]), 0u);
  EXPECT_EQ(y[1], std::ldexp(1.0f, 127));
  EXPECT_EQ(y[2], std::numeric_limits<float>::infinity());
  EXPECT_EQ(y[3], -std::numeric_limits<float>::infinity());
}

// quantize(dequantize(b)) == b for every block whose largest code value is
// +-4 or +-6 (E2M1; the quantizer puts amax there): exponents 0..252 (from
// 253 on, 4 x 2^(e - 127) is not a finite float), codes random (code 8, "-0",
// comes back as 0, the table's first zero).
TEST(Mxfp4, QuantizerRoundTripsRepresentableBlocks) {
  std::mt19937 rng(39);
  std::uniform_int_distribution<int> code(0, 15), top(0, 3);
  const int tops[4] = {6, 7, 14, 15};  // 4, 6, -4, -6
  for (int e = 0; e <= 252; ++e)
    for (int rep = 0; rep < 4; ++rep) {
      int codes[32];
      for (int& c : codes) {
        c = code(rng);
        if ((c & 7) > 5) c &= 8 | 5;  // below the top: at most 3
      }
      codes[rng() % 32] = tops[top(rng)];
      const block_mxfp4 b = make_block(e, codes);
      float x[32];
      dequantize_row(DType::MXFP4, &b, x, 32);
      block_mxfp4 q;
      quantize_weights(DType::MXFP4, x, &q, 32);
      ASSERT_EQ(q.e, b.e) << "e=" << e;
      for (int j = 0; j < 32; ++j) {
        const int got = j < 16 ? q.qs[j] & 15 : q.qs[j - 16] >> 4;
        ASSERT_EQ(got, codes[j] == 8 ? 0 : codes[j]) << "e=" << e << " element " << j;
      }
    }
}

// The exponent is floor(log2(amax)) - 2 + 127 (amax / 2^(e - 127) in [4, 8)),
// and every value takes a nearest code: no code is closer.
TEST(Mxfp4, QuantizerPicksTheExponentAndNearestCodes) {
  std::mt19937 rng(40);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::uniform_real_distribution<float> mag(-30.0f, 30.0f);
  for (int rep = 0; rep < 2000; ++rep) {
    float x[32];
    const float scale = std::exp2(mag(rng));
    float amax = 0;
    for (float& v : x) {
      v = g(rng) * scale;
      amax = std::max(amax, std::fabs(v));
    }
    block_mxfp4 q;
    quantize_weights(DType::MXFP4, x, &q, 32);
    int ex;
    std::frexp(amax, &ex);  // amax = f * 2^ex, f in [0.5, 1): floor(log2) = ex - 1
    // log2f may round up just below a power of two; the quantizer takes
    // ggml's log2f, so allow that one case.
    const bool near_pow2 = std::fabs(std::ldexp(1.0f, ex) - amax) <= std::ldexp(amax, -20);
    if (!near_pow2) {
      ASSERT_EQ(q.e, ex - 1 + 125) << amax;
    }
    const float d = std::ldexp(1.0f, q.e - 128);
    for (int j = 0; j < 32; ++j) {
      const int c = j < 16 ? q.qs[j] & 15 : q.qs[j - 16] >> 4;
      const double err = std::fabs(static_cast<double>(kMxfp4Values[c]) * d - x[j]);
      // (The quantizer compares float errors: a near-tie may go either way
      // by a rounding of x.)
      for (int k = 0; k < 16; ++k)
        ASSERT_LE(err, std::fabs(static_cast<double>(kMxfp4Values[k]) * d - x[j]) + std::ldexp(std::fabs(x[j]), -22))
            << x[j] << " code " << c;
    }
  }
}

// Halfway between two codes the first in table order wins: 0.5 -> 0 (not 1),
// 5 -> 4, -5 -> -4, 10 -> 8, -10 -> -8, -0.5 -> 0, and 0 or -0 -> code 0.
// amax 12 makes e = 128 (scale 1 on the doubled values).
TEST(Mxfp4, QuantizerTiesGoToTheFirstCode) {
  float x[32] = {};
  x[0] = 12.0f;
  const float vals[] = {0.5f, 5.0f, -5.0f, 10.0f, -10.0f, -0.5f, 2.5f, -3.5f, 7.0f, -0.0f, 1.5f};
  const int want[] = {0, 4, 12, 6, 14, 0, 2, 11, 5, 0, 1};
  for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); ++i) x[1 + i] = vals[i];
  block_mxfp4 q;
  quantize_weights(DType::MXFP4, x, &q, 32);
  ASSERT_EQ(q.e, 128);
  EXPECT_EQ(q.qs[0] & 15, 7);
  for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); ++i)
    EXPECT_EQ(q.qs[1 + i] & 15, want[i]) << vals[i];
}

// Degenerate blocks quantize without undefined behaviour: all zero (e = 0),
// amax below 2^-125 (e clamped to 0 where ggml's cast is undefined), an
// infinity (e = 255), a NaN (ignored by amax, code 0).
TEST(Mxfp4, QuantizerDegenerateBlocks) {
  float x[32] = {};
  block_mxfp4 q;
  quantize_weights(DType::MXFP4, x, &q, 32);
  EXPECT_EQ(q.e, 0);
  for (uint8_t b : q.qs) EXPECT_EQ(b, 0);

  x[3] = 1e-40f;
  quantize_weights(DType::MXFP4, x, &q, 32);
  EXPECT_EQ(q.e, 0);

  x[3] = std::numeric_limits<float>::infinity();
  quantize_weights(DType::MXFP4, x, &q, 32);
  EXPECT_EQ(q.e, 255);

  x[3] = std::numeric_limits<float>::quiet_NaN();
  x[4] = 12.0f;
  quantize_weights(DType::MXFP4, x, &q, 32);
  EXPECT_EQ(q.e, 128);
  EXPECT_EQ(q.qs[3] & 15, 0);
  EXPECT_EQ(q.qs[4] & 15, 7);
}

// One block: d_x * d_w times the exact integer sum, rounded once. d_x (an
// fp16) times a power of two, times an integer below 2^16, is exact in
// double, so the float result must equal that product rounded to float.
TEST(Mxfp4, ScalarDotOfOneBlockIsTheExactSumTimesBothScales) {
  std::mt19937 rng(41);
  std::uniform_int_distribution<int> byte(0, 255), q8(-127, 127), ex(1, 250);
  const DotFn dot = ref_kernel_table().dot[slot(DType::MXFP4)];
  for (int rep = 0; rep < 20000; ++rep) {
    block_mxfp4 w;
    w.e = static_cast<uint8_t>(rep < 256 ? rep : ex(rng));
    for (uint8_t& b : w.qs) b = static_cast<uint8_t>(byte(rng));
    block_q8_0 x;
    // d_x = m 2^-k with m <= 256, k < 12: d_x d_w is exact in float even at
    // e = 0 (lowest bit 2^-139).
    x.d = float_to_half(std::ldexp(static_cast<float>(byte(rng) + 1), -(byte(rng) % 12)));
    for (int8_t& v : x.qs) v = static_cast<int8_t>(q8(rng));
    int64_t sumi = 0;
    for (int j = 0; j < 32; ++j) {
      const int c = j < 16 ? w.qs[j] & 15 : w.qs[j - 16] >> 4;
      sumi += static_cast<int64_t>(2 * spec_value(c, 127)) * x.qs[j];  // 2 x E2M1: an integer
    }
    const double exact = static_cast<double>(half_to_float(x.d)) * std::ldexp(1.0, w.e - 128) * sumi;
    const float got = dot(&w, &x, 32);
    const bool d_overflows = static_cast<double>(half_to_float(x.d)) * std::ldexp(1.0, w.e - 128) >
                             std::numeric_limits<float>::max();
    if (d_overflows && sumi == 0) {
      ASSERT_TRUE(std::isnan(got)) << "e=" << int(w.e);  // inf * 0, as ggml computes it
    } else if (std::fabs(exact) > std::numeric_limits<float>::max()) {
      ASSERT_EQ(got, sumi > 0 ? INFINITY : -INFINITY) << "e=" << int(w.e) << " sumi=" << sumi;
    } else {
      ASSERT_EQ(got, static_cast<float>(exact)) << "e=" << int(w.e) << " sumi=" << sumi;
    }
  }
}

// Many blocks: the scalar dot against the F64 dot of the dequantized
// weights and activations, within float rounding of the block sums.
TEST(Mxfp4, ScalarDotMatchesF64DotOfDequantizedValues) {
  std::mt19937 rng(42);
  std::uniform_int_distribution<int> byte(0, 255), ex(110, 135);
  std::normal_distribution<float> g(0.0f, 1.0f);
  const DotFn dot = ref_kernel_table().dot[slot(DType::MXFP4)];
  for (int64_t nb : {1, 2, 7, 64, 129}) {
    const int64_t n = nb * 32;
    std::vector<block_mxfp4> w(nb);
    for (auto& b : w) {
      b.e = static_cast<uint8_t>(ex(rng));
      for (uint8_t& q : b.qs) q = static_cast<uint8_t>(byte(rng));
    }
    std::vector<float> xf(n);
    for (float& v : xf) v = g(rng);
    std::vector<block_q8_0> xq(nb);
    quantize_activation(DType::MXFP4, Precision::kNative, xf.data(), xq.data(), n);
    std::vector<float> wd(n), xd(n);
    dequantize_row(DType::MXFP4, w.data(), wd.data(), n);
    dequantize_row(DType::Q8_0, xq.data(), xd.data(), n);
    double want = 0, abs_sum = 0;
    for (int64_t i = 0; i < n; ++i) {
      want += static_cast<double>(wd[i]) * xd[i];
      abs_sum += std::fabs(static_cast<double>(wd[i]) * xd[i]);
    }
    const float got = dot(w.data(), xq.data(), n);
    EXPECT_NEAR(got, want, 1e-6 * static_cast<double>(nb) * abs_sum + 1e-30) << "blocks " << nb;
  }
}

// Under Precision::kReference a row is dequantized to F32 and dotted with
// F32 activations: the F64 dot of the dequantized row, within F32 rounding.
TEST(Mxfp4, ReferencePrecisionDequantizesRows) {
  std::mt19937 rng(43);
  std::uniform_int_distribution<int> byte(0, 255), ex(115, 130);
  const int64_t n = 256, n_rows = 3;
  std::vector<block_mxfp4> w(n / 32 * n_rows);
  for (auto& b : w) {
    b.e = static_cast<uint8_t>(ex(rng));
    for (uint8_t& q : b.qs) q = static_cast<uint8_t>(byte(rng));
  }
  TensorView v;
  v.data = reinterpret_cast<const uint8_t*>(w.data());
  v.type = DType::MXFP4;
  v.ne[0] = n;
  v.ne[1] = n_rows;
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> x(n), y(n_rows), scratch(n);
  for (float& f : x) f = g(rng);
  matvec_rows(v, Precision::kReference, x.data(), y.data(), 0, n_rows, scratch.data());
  for (int64_t r = 0; r < n_rows; ++r) {
    double want = 0, abs_sum = 0;
    for (int64_t i = 0; i < n; ++i) {
      const block_mxfp4& b = w[r * n / 32 + i / 32];
      const int j = i % 32;
      const int c = j < 16 ? b.qs[j] & 15 : b.qs[j - 16] >> 4;
      want += static_cast<double>(spec_value(c, b.e)) * x[i];
      abs_sum += std::fabs(static_cast<double>(spec_value(c, b.e)) * x[i]);
    }
    EXPECT_NEAR(y[r], want, 2e-5 * abs_sum) << "row " << r;
  }
}

}  // namespace
}  // namespace colibri
