// fp16/bf16 conversions against known bit patterns (IEEE 754 binary16 and
// bfloat16 definitions) and against the compiler's own _Float16 conversion.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "tensor/half.h"
#include "tensor/ops.h"

namespace colibri {
namespace {

float f(uint32_t bits) { return f32_from_bits(bits); }

TEST(Fp16, KnownPatterns) {
  EXPECT_EQ(fp32_to_fp16(1.0f), 0x3C00);
  EXPECT_EQ(fp32_to_fp16(-2.0f), 0xC000);
  EXPECT_EQ(fp32_to_fp16(0.1f), 0x2E66);
  EXPECT_EQ(fp32_to_fp16(-0.0f), 0x8000);
  EXPECT_EQ(fp32_to_fp16(65504.0f), 0x7BFF);  // largest finite
  EXPECT_EQ(fp32_to_fp16(65519.996f), 0x7BFF);
  EXPECT_EQ(fp32_to_fp16(65520.0f), 0x7C00);  // tie with an odd mantissa: to infinity
  EXPECT_EQ(fp32_to_fp16(1e10f), 0x7C00);
  EXPECT_EQ(fp32_to_fp16(std::numeric_limits<float>::infinity()), 0x7C00);
  EXPECT_EQ(fp32_to_fp16(-std::numeric_limits<float>::infinity()), 0xFC00);
  const uint16_t nan = fp32_to_fp16(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan & 0x7C00, 0x7C00);
  EXPECT_NE(nan & 0x03FF, 0);
  EXPECT_NE(fp32_to_fp16(f(0x7F800001)) & 0x03FF, 0);  // signalling NaN stays NaN
  // Ties to even in the normal range: 1 + 2^-11 is halfway between 0x3C00 and 0x3C01.
  EXPECT_EQ(fp32_to_fp16(1.0f + 0x1p-11f), 0x3C00);
  EXPECT_EQ(fp32_to_fp16(1.0f + 3 * 0x1p-11f), 0x3C02);
  EXPECT_EQ(fp32_to_fp16(1.0f + 0x1p-11f + 0x1p-20f), 0x3C01);
  // Subnormals: units of 2^-24.
  EXPECT_EQ(fp32_to_fp16(0x1p-24f), 0x0001);
  EXPECT_EQ(fp32_to_fp16(0x1p-25f), 0x0000);  // tie: to even (zero)
  EXPECT_EQ(fp32_to_fp16(0x1p-25f * 1.0000001f), 0x0001);
  EXPECT_EQ(fp32_to_fp16(3 * 0x1p-25f), 0x0002);  // tie between 1 and 2: to 2
  EXPECT_EQ(fp32_to_fp16(0x1p-14f), 0x0400);      // smallest normal
  EXPECT_EQ(fp32_to_fp16(0x1p-14f - 0x1p-25f), 0x0400);  // tie between 0x3FF and 0x400
  EXPECT_EQ(fp32_to_fp16(0x1p-30f), 0x0000);
  EXPECT_EQ(fp32_to_fp16(-0x1p-24f), 0x8001);

  EXPECT_EQ(fp16_to_fp32(0x0001), 0x1p-24f);
  EXPECT_EQ(fp16_to_fp32(0x03FF), 1023 * 0x1p-24f);
  EXPECT_EQ(fp16_to_fp32(0x7BFF), 65504.0f);
  EXPECT_EQ(fp16_to_fp32(0x3555), 0x1.554p-2f);
  EXPECT_EQ(fp16_to_fp32(0xFC00), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(fp16_to_fp32(0x7E00)));
  EXPECT_TRUE(std::isnan(fp16_to_fp32(0xFC01)));
  EXPECT_TRUE(std::signbit(fp16_to_fp32(0x8000)));
}

TEST(Fp16, EveryHalfRoundTrips) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float v = fp16_to_fp32(static_cast<uint16_t>(h));
    if (std::isnan(v)) continue;
    ASSERT_EQ(fp32_to_fp16(v), h) << "half 0x" << std::hex << h;
  }
}

// The compiler's float -> half conversion (libgcc, F16C, or AArch64's fcvt
// through __fp16, which GCC 12 offers in C++ where _Float16 is C only) is an
// independent implementation of the same rounding.
#if defined(__aarch64__)
using CompilerHalf = __fp16;
#define CLB_COMPILER_HALF 1
#elif defined(__FLT16_MAX__)
using CompilerHalf = _Float16;
#define CLB_COMPILER_HALF 1
#endif
#if defined(CLB_COMPILER_HALF)
TEST(Fp16, MatchesCompilerFloat16) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 2000000; ++i) {
    // Bias exponents toward fp16's range so subnormals and overflow both occur.
    uint32_t u = bits(rng);
    if (i & 1) u = (u & 0x807FFFFF) | ((100 + (u >> 23) % 48) << 23);
    const float v = f(u);
    if (std::isnan(v)) continue;
    const CompilerHalf c = static_cast<CompilerHalf>(v);
    uint16_t cb;
    std::memcpy(&cb, &c, 2);
    ASSERT_EQ(fp32_to_fp16(v), cb) << "float bits 0x" << std::hex << u;
    ASSERT_EQ(fp16_to_fp32(cb), static_cast<float>(c));
  }
}
#endif

TEST(Bf16, KnownPatterns) {
  EXPECT_EQ(fp32_to_bf16(1.0f), 0x3F80);
  EXPECT_EQ(fp32_to_bf16(-1.0f), 0xBF80);
  EXPECT_EQ(fp32_to_bf16(1.0f + 0x1p-8f), 0x3F80);       // tie: to even
  EXPECT_EQ(fp32_to_bf16(1.0f + 3 * 0x1p-8f), 0x3F82);   // tie: to even (up)
  EXPECT_EQ(fp32_to_bf16(1.0f + 0x1p-8f + 0x1p-20f), 0x3F81);
  EXPECT_EQ(fp32_to_bf16(f(0x7F7FFFFF)), 0x7F80);  // FLT_MAX rounds to infinity
  EXPECT_EQ(fp32_to_bf16(std::numeric_limits<float>::infinity()), 0x7F80);
  EXPECT_EQ(fp32_to_bf16(f(0x00010000)), 0x0001);  // subnormals kept
  EXPECT_EQ(fp32_to_bf16(f(0x00008000)), 0x0000);  // tie: to even
  EXPECT_EQ(fp32_to_bf16(f(0x00018000)), 0x0002);
  const uint16_t nan = fp32_to_bf16(f(0x7F800001));  // signalling NaN whose top bits are inf's
  EXPECT_EQ(nan & 0x7F80, 0x7F80);
  EXPECT_NE(nan & 0x007F, 0);
  EXPECT_EQ(bf16_to_fp32(0x4049), 3.140625f);
  EXPECT_EQ(bf16_to_fp32(0x0001), f(0x00010000));
  EXPECT_TRUE(std::isnan(bf16_to_fp32(0x7FC0)));
}

TEST(Bf16, EveryBf16RoundTrips) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float v = bf16_to_fp32(static_cast<uint16_t>(h));
    if (std::isnan(v)) continue;
    ASSERT_EQ(fp32_to_bf16(v), h);
  }
}

}  // namespace
}  // namespace colibri
