// Hand-built blocks of every type, dequantized and compared with values
// derived here from the format definitions (element -> bits, written per
// element rather than in the kernels' loop order). Scales are powers of two so
// every expected value is exact.
#include <gtest/gtest.h>

#include <random>

#include "tensor/half.h"
#include "tensor/ops.h"
#include "tensor/quant_blocks.h"

namespace colibri {
namespace {

std::vector<float> deq(DType t, const void* b, int64_t n) {
  std::vector<float> y(n);
  dequantize_row(t, b, y.data(), n);
  return y;
}

TEST(KnownBlocks, Q4_0) {
  block_q4_0 b;
  b.d = float_to_half(0.5f);
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  const auto y = deq(DType::Q4_0, &b, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], (j - 8) * 0.5f);
    EXPECT_EQ(y[j + 16], (15 - j - 8) * 0.5f);
  }
}

TEST(KnownBlocks, Q4_1) {
  block_q4_1 b;
  b.d = float_to_half(0.25f);
  b.m = float_to_half(-1.0f);
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(((j * 7) & 15) | (j << 4));
  const auto y = deq(DType::Q4_1, &b, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], ((j * 7) & 15) * 0.25f - 1.0f);
    EXPECT_EQ(y[j + 16], j * 0.25f - 1.0f);
  }
}

// Fifth bit of element e (0..31) is bit e of the little-endian qh word.
int q5_value(const uint8_t* qs, const uint8_t* qh, int e) {
  const int nib = e < 16 ? (qs[e] & 15) : (qs[e - 16] >> 4);
  const int hi = (qh[e / 8] >> (e % 8)) & 1;
  return nib | (hi << 4);
}

TEST(KnownBlocks, Q5_0) {
  block_q5_0 b;
  b.d = float_to_half(2.0f);
  const uint8_t qh[4] = {0xA5, 0x0F, 0xF0, 0x81};
  std::memcpy(b.qh, qh, 4);
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | ((j ^ 9) << 4));
  const auto y = deq(DType::Q5_0, &b, 32);
  for (int e = 0; e < 32; ++e) EXPECT_EQ(y[e], (q5_value(b.qs, b.qh, e) - 16) * 2.0f) << e;
}

TEST(KnownBlocks, Q5_1) {
  block_q5_1 b;
  b.d = float_to_half(0.125f);
  b.m = float_to_half(3.0f);
  const uint8_t qh[4] = {0xFF, 0x00, 0x5A, 0xC3};
  std::memcpy(b.qh, qh, 4);
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>((15 - j) | (j << 4));
  const auto y = deq(DType::Q5_1, &b, 32);
  for (int e = 0; e < 32; ++e) EXPECT_EQ(y[e], q5_value(b.qs, b.qh, e) * 0.125f + 3.0f) << e;
}

TEST(KnownBlocks, Q8_0) {
  block_q8_0 b;
  b.d = float_to_half(-0.0625f);
  for (int j = 0; j < 32; ++j) b.qs[j] = static_cast<int8_t>(j * 8 - 128);  // -128 .. 120
  const auto y = deq(DType::Q8_0, &b, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], (j * 8 - 128) * -0.0625f);
}

// In the K-quants, element e of a 256-block sits in half h = e / 128, group
// k = (e % 128) / 32 and lane l = e % 32.
struct KPos {
  int h, k, l;
  explicit KPos(int e) : h(e / 128), k((e % 128) / 32), l(e % 32) {}
};

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

TEST(KnownBlocks, Q2_K) {
  block_q2_K b;
  b.d = float_to_half(0.5f);
  b.dmin = float_to_half(0.25f);
  for (int i = 0; i < 16; ++i) b.scales[i] = static_cast<uint8_t>(i | ((15 - i) << 4));
  const auto r = random_bytes(64, 1);
  std::memcpy(b.qs, r.data(), 64);
  const auto y = deq(DType::Q2_K, &b, 256);
  for (int e = 0; e < 256; ++e) {
    const KPos p(e);
    const int q = (b.qs[32 * p.h + p.l] >> (2 * p.k)) & 3;
    const int sc = b.scales[e / 16];
    EXPECT_EQ(y[e], 0.5f * (sc & 15) * q - 0.25f * (sc >> 4)) << e;
  }
}

// Packs sixteen 6-bit q3_K scales: low nibble of scale i in byte i % 8 (low
// nibble for i < 8, high for i >= 8), top two bits in byte 8 + i % 4 at bit
// 2 * (i / 4).
void pack_q3k_scales(const int s[16], uint8_t out[12]) {
  std::memset(out, 0, 12);
  for (int i = 0; i < 16; ++i) {
    out[i % 8] |= static_cast<uint8_t>((s[i] & 15) << (i < 8 ? 0 : 4));
    out[8 + i % 4] |= static_cast<uint8_t>((s[i] >> 4) << (2 * (i / 4)));
  }
}

TEST(KnownBlocks, Q3_K) {
  block_q3_K b;
  b.d = float_to_half(0.25f);
  // Edge cases: 0 and 63 (scale -32 and +31), 32 (zero), alternating bits.
  const int s[16] = {0, 63, 32, 31, 33, 1, 62, 21, 42, 16, 47, 48, 15, 5, 58, 36};
  pack_q3k_scales(s, b.scales);
  const auto r = random_bytes(96, 2);
  std::memcpy(b.hmask, r.data(), 32);
  std::memcpy(b.qs, r.data() + 32, 64);
  const auto y = deq(DType::Q3_K, &b, 256);
  for (int e = 0; e < 256; ++e) {
    const KPos p(e);
    const int q2 = (b.qs[32 * p.h + p.l] >> (2 * p.k)) & 3;
    const int hbit = (b.hmask[p.l] >> (4 * p.h + p.k)) & 1;
    EXPECT_EQ(y[e], 0.25f * (s[e / 16] - 32) * (q2 - (hbit ? 0 : 4))) << e;
  }
}

// Packs eight 6-bit scales and mins of q4_K/q5_K: sub-blocks 0..3 whole in
// bytes 0..3 (scales) and 4..7 (mins); sub-blocks 4..7 split into a low nibble
// in bytes 8..11 (scale low, min high) and two high bits in the top of bytes
// j - 4 (scale) and j (min).
void pack_k4_scales(const int sc[8], const int mn[8], uint8_t out[12]) {
  std::memset(out, 0, 12);
  for (int j = 0; j < 4; ++j) {
    out[j] = static_cast<uint8_t>(sc[j]);
    out[j + 4] = static_cast<uint8_t>(mn[j]);
  }
  for (int j = 4; j < 8; ++j) {
    out[j + 4] = static_cast<uint8_t>((sc[j] & 15) | ((mn[j] & 15) << 4));
    out[j - 4] |= static_cast<uint8_t>((sc[j] >> 4) << 6);
    out[j] |= static_cast<uint8_t>((mn[j] >> 4) << 6);
  }
}

const int kSc[8] = {63, 0, 17, 48, 63, 1, 32, 47};
const int kMn[8] = {0, 63, 5, 33, 62, 63, 16, 0};

TEST(KnownBlocks, Q4_K) {
  block_q4_K b;
  b.d = float_to_half(0.5f);
  b.dmin = float_to_half(0.125f);
  pack_k4_scales(kSc, kMn, b.scales);
  const auto r = random_bytes(128, 3);
  std::memcpy(b.qs, r.data(), 128);
  const auto y = deq(DType::Q4_K, &b, 256);
  for (int e = 0; e < 256; ++e) {
    const int j = e / 32, l = e % 32;
    const int q = (b.qs[32 * (j / 2) + l] >> (4 * (j % 2))) & 15;
    EXPECT_EQ(y[e], 0.5f * kSc[j] * q - 0.125f * kMn[j]) << e;
  }
}

TEST(KnownBlocks, Q5_K) {
  block_q5_K b;
  b.d = float_to_half(0.25f);
  b.dmin = float_to_half(1.0f);
  pack_k4_scales(kSc, kMn, b.scales);
  const auto r = random_bytes(160, 4);
  std::memcpy(b.qh, r.data(), 32);
  std::memcpy(b.qs, r.data() + 32, 128);
  const auto y = deq(DType::Q5_K, &b, 256);
  for (int e = 0; e < 256; ++e) {
    const int j = e / 32, l = e % 32;
    const int q = ((b.qs[32 * (j / 2) + l] >> (4 * (j % 2))) & 15) | (((b.qh[l] >> j) & 1) << 4);
    EXPECT_EQ(y[e], 0.25f * kSc[j] * q - 1.0f * kMn[j]) << e;
  }
}

TEST(KnownBlocks, Q6_K) {
  block_q6_K b;
  b.d = float_to_half(0.5f);
  const int8_t sc[16] = {-128, 127, 0, 1, -1, 64, -64, 5, 100, -100, 2, 3, -7, 9, 31, -32};
  std::memcpy(b.scales, sc, 16);
  const auto r = random_bytes(192, 5);
  std::memcpy(b.ql, r.data(), 128);
  std::memcpy(b.qh, r.data() + 128, 64);
  const auto y = deq(DType::Q6_K, &b, 256);
  for (int e = 0; e < 256; ++e) {
    const KPos p(e);
    const int lo = (b.ql[64 * p.h + p.l + 32 * (p.k & 1)] >> (4 * (p.k >> 1))) & 15;
    const int hi = (b.qh[32 * p.h + p.l] >> (2 * p.k)) & 3;
    EXPECT_EQ(y[e], 0.5f * sc[e / 16] * ((lo | (hi << 4)) - 32)) << e;
  }
}

TEST(KnownBlocks, FloatTypes) {
  const float v[4] = {1.5f, -0.0f, 65504.0f, 0x1p-24f};
  std::vector<float> y(4);
  dequantize_row(DType::F32, v, y.data(), 4);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(y[i], v[i]);
  const uint16_t h[4] = {0x3E00, 0x8000, 0x7BFF, 0x0001};
  dequantize_row(DType::F16, h, y.data(), 4);
  EXPECT_EQ(y[0], 1.5f);
  EXPECT_TRUE(std::signbit(y[1]));
  EXPECT_EQ(y[2], 65504.0f);
  EXPECT_EQ(y[3], 0x1p-24f);
  const uint16_t bf[2] = {0x3FC0, 0xC040};
  dequantize_row(DType::BF16, bf, y.data(), 2);
  EXPECT_EQ(y[0], 1.5f);
  EXPECT_EQ(y[1], -3.0f);
}

// The eight 6-bit scales and mins of a q4_K/q5_K block read at once equal
// those read one by one.
TEST(KnownBlocks, K4ScalesMinsAtOnceEqualOneByOne) {
  std::mt19937 rng(5);
  for (int i = 0; i < 1000; ++i) {
    uint8_t q[12];
    for (uint8_t& b : q) b = static_cast<uint8_t>(rng());
    uint64_t sc, m;
    k4_scales_mins(q, &sc, &m);
    for (int j = 0; j < 8; ++j) {
      uint8_t s1, m1;
      k4_scale_min(j, q, &s1, &m1);
      EXPECT_EQ((sc >> (8 * j)) & 0xFF, s1) << "scale " << j;
      EXPECT_EQ((m >> (8 * j)) & 0xFF, m1) << "min " << j;
    }
  }
}

}  // namespace
}  // namespace colibri
