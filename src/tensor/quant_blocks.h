// Quant block layouts, byte-for-byte those of ggml (ggml-common.h), so a GGUF
// tensor's bytes can be read in place as arrays of these structs.
//
// Halves are stored as raw IEEE binary16 bits (uint16_t); see tensor/half.h.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>

namespace colibri {

constexpr int kQK = 32;    // elements per block of the legacy quants
constexpr int kQK_K = 256; // elements per super-block of the K-quants

// x = (q - 8) * d, q in 0..15. Element j in the low nibble of qs[j], element
// j + 16 in the high nibble.
struct block_q4_0 {
  uint16_t d;
  uint8_t qs[kQK / 2];
};
// x = q * d + m.
struct block_q4_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qs[kQK / 2];
};
// x = (q - 16) * d, q in 0..31; bit j of qh is the fifth bit of element j.
struct block_q5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};
// x = q * d + m.
struct block_q5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};
// x = q * d.
struct block_q8_0 {
  uint16_t d;
  int8_t qs[kQK];
};
// Activations for q4_1/q5_1: s = d * sum(qs) carries the min term.
struct block_q8_1 {
  uint16_t d;
  uint16_t s;
  int8_t qs[kQK];
};

// 16 sub-blocks of 16: x = d * (scales[i] & 0xF) * q - dmin * (scales[i] >> 4),
// q in 0..3.
struct block_q2_K {
  uint8_t scales[kQK_K / 16];
  uint8_t qs[kQK_K / 4];
  uint16_t d;
  uint16_t dmin;
};
// 16 sub-blocks of 16 with 6-bit signed scales (packed in 12 bytes, bias 32):
// x = d * (scale - 32) * (q - 4 * !hbit), q in 0..3.
struct block_q3_K {
  uint8_t hmask[kQK_K / 8];
  uint8_t qs[kQK_K / 4];
  uint8_t scales[12];
  uint16_t d;
};
// 8 sub-blocks of 32 with 6-bit scales and mins packed in 12 bytes:
// x = d * sc * q - dmin * m, q in 0..15.
struct block_q4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qs[kQK_K / 2];
};
// As q4_K with a fifth bit per element in qh.
struct block_q5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qh[kQK_K / 8];
  uint8_t qs[kQK_K / 2];
};
// 16 sub-blocks of 16: x = d * scales[i] * (q - 32), q in 0..63 (4 low bits in
// ql, 2 high bits in qh).
struct block_q6_K {
  uint8_t ql[kQK_K / 2];
  uint8_t qh[kQK_K / 4];
  int8_t scales[kQK_K / 16];
  uint16_t d;
};
// OCP microscaling FP4: x = kMxfp4Values[code] * 2^(e - 128), code a 4-bit
// E2M1 value (bit 3 the sign) in the nibbles as q4_0's (element j low in
// qs[j], j + 16 high), e an E8M0 exponent. The table holds twice the E2M1
// values (0, .5, 1, 1.5, 2, 3, 4, 6) so products stay in int8, and the scale
// is half the E8M0 one, 2^(e - 127), to make up for it, as ggml does.
struct block_mxfp4 {
  uint8_t e;
  uint8_t qs[kQK / 2];
};
inline constexpr int8_t kMxfp4Values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// IQ4_NL: 32 elements x = d * kIq4nlValues[code], the 4-bit codes in the
// nibbles as q4_0's (element j low in qs[j], j + 16 high). The table is a
// non-uniform grid, denser near zero, as trained weights are distributed.
struct block_iq4_nl {
  uint16_t d;
  uint8_t qs[kQK / 2];
};
inline constexpr int8_t kIq4nlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};
// IQ4_XS: 256 elements in 8 sub-blocks of 32, each x = d * (ls - 32) *
// kIq4nlValues[code] with a 6-bit scale ls: its low 4 bits in scales_l[ib / 2]
// (low nibble for even ib), its high 2 bits at bit 2 ib of scales_h. Sub-block
// ib's codes are qs[16 ib .. 16 ib + 15], laid out as one IQ4_NL block's.
struct block_iq4_xs {
  uint16_t d;
  uint16_t scales_h;
  uint8_t scales_l[kQK_K / 64];
  uint8_t qs[kQK_K / 2];
};
// The 6-bit scale of sub-block ib (0..7) of an IQ4_XS block, bias 32 removed.
inline int iq4_xs_scale(const block_iq4_xs& b, int ib) {
  const int lo = (b.scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF;
  const int hi = (b.scales_h >> (2 * ib)) & 3;
  return (lo | (hi << 4)) - 32;
}
// Sets that scale to l (-32..31).
inline void iq4_xs_set_scale(block_iq4_xs& b, int ib, int l) {
  const int ls = l + 32, shift = 4 * (ib % 2);
  b.scales_l[ib / 2] = static_cast<uint8_t>((b.scales_l[ib / 2] & ~(0xF << shift)) | ((ls & 0xF) << shift));
  b.scales_h = static_cast<uint16_t>((b.scales_h & ~(3 << (2 * ib))) | ((ls >> 4) << (2 * ib)));
}

// The IQ1, IQ2 and IQ3 types: each group of 8 (IQ1, IQ2) or 4 (IQ3) weights
// is an index into a codebook of points (tensor/iq_grids.h), the IQ2 and IQ3
// points unsigned, their signs beside them: 7 bits a group of 8, the eighth
// sign making the count of minus signs even (iq2_signs). ls below is a
// sub-block scale field, db = d * (2 ls + 1).
//
// IQ2_XXS: 8 sub-blocks of 32; sub-block ib is the two 32-bit words qs[4 ib ..
// 4 ib + 3]: the first holds four 8-bit indices into the 256-point grid, the
// second four 7-bit sign fields and ls in its top 4 bits; x = db / 8 * grid.
struct block_iq2_xxs {
  uint16_t d;
  uint16_t qs[kQK_K / 8];
};
// IQ2_XS: per group of 8 a 16-bit word (9-bit index into the 512-point grid,
// 7-bit signs); scales[ib] holds the 4-bit ls of sub-block ib's two halves of
// 16 (low nibble first); x = db / 8 * grid.
struct block_iq2_xs {
  uint16_t d;
  uint16_t qs[kQK_K / 8];
  uint8_t scales[kQK_K / 32];
};
// IQ2_S: 10-bit indices into the 1024-point grid (low 8 bits in qs[0..31],
// the high 2 bits of group l of sub-block ib at bit 2 l of qh[ib]), the eight
// signs of each group as a whole byte in qs[32..63], scales as IQ2_XS's.
struct block_iq2_s {
  uint16_t d;
  uint8_t qs[kQK_K / 4];
  uint8_t qh[kQK_K / 32];
  uint8_t scales[kQK_K / 32];
};
// IQ3_XXS: 8-bit indices into the 256-point grid of 4 in qs[0..63], then a
// 32-bit word per sub-block as IQ2_XXS's second one; x = db / 4 * grid.
struct block_iq3_xxs {
  uint16_t d;
  uint8_t qs[3 * kQK_K / 8];
};
// IQ3_S: 9-bit indices into the 512-point grid of 4 (low 8 bits in qs, the
// ninth bit of index k of sub-block ib at bit k of qh[ib]), whole sign bytes,
// a 4-bit ls per sub-block in scales (two a byte); x = d (2 ls + 1) grid.
struct block_iq3_s {
  uint16_t d;
  uint8_t qs[kQK_K / 4];
  uint8_t qh[kQK_K / 32];
  uint8_t signs[kQK_K / 8];
  uint8_t scales[kQK_K / 64];
};
// IQ1_S: 11-bit indices into the 2048-point grid of 8 values in -1..1 (low 8
// bits in qs, 3 high bits of group l at bit 3 l of qh[ib]); qh[ib] bits 12..14
// hold ls, bit 15 the sign of the shift: x = db * (grid + delta), delta =
// +-kIq1Delta.
struct block_iq1_s {
  uint16_t d;
  uint8_t qs[kQK_K / 8];
  uint16_t qh[kQK_K / 32];
};
// IQ1_M: the IQ1_S grid with its index bits in qs and the low 3 bits of each
// nibble of qh (bit 3 of the nibble: the sign of that group's shift); a 3-bit
// ls for each 16 weights in scales, and the fp16 d spread over the top
// nibbles of the four 16-bit scale words (iq1_m_d).
struct block_iq1_m {
  uint8_t qs[kQK_K / 8];
  uint8_t qh[kQK_K / 16];
  uint8_t scales[kQK_K / 32];
};
inline constexpr float kIq1Delta = 0.125f;
// The sign byte of 7-bit field i: bit 7 set where i has an odd count of ones.
constexpr uint8_t iq2_signs(uint32_t i) {
  return static_cast<uint8_t>((i & 127) | ((std::popcount(i & 127) & 1) << 7));
}
// The 16-bit scale words of an IQ1_M block, and its d.
inline void iq1_m_scale_words(const block_iq1_m& b, uint16_t sc[4]) {
  for (int i = 0; i < 4; ++i) sc[i] = static_cast<uint16_t>(b.scales[2 * i] | (b.scales[2 * i + 1] << 8));
}
inline uint16_t iq1_m_d(const uint16_t sc[4]) {
  return static_cast<uint16_t>((sc[0] >> 12) | ((sc[1] >> 8) & 0x00F0) | ((sc[2] >> 4) & 0x0F00) |
                               (sc[3] & 0xF000));
}

// 2^(e - 128) exactly, built from its bits (ggml's GGML_E8M0_TO_FP32_HALF):
// e = 0 and 1 are the denormals 2^-128 and 2^-127, e = 255 gives 2^127 (E8M0's
// NaN code is not treated specially, as in ggml).
constexpr float e8m0_to_float_half(uint8_t e) {
  return std::bit_cast<float>(e < 2 ? 0x00200000u << e : static_cast<uint32_t>(e - 1) << 23);
}

// Activations for the K-quants: bsums[i] = sum of qs[16 i .. 16 i + 15].
struct block_q8_K {
  float d;
  int8_t qs[kQK_K];
  int16_t bsums[kQK_K / 16];
};

static_assert(sizeof(block_q4_0) == 18);
static_assert(sizeof(block_q4_1) == 20);
static_assert(sizeof(block_q5_0) == 22);
static_assert(sizeof(block_q5_1) == 24);
static_assert(sizeof(block_q8_0) == 34);
static_assert(sizeof(block_q8_1) == 36);
static_assert(sizeof(block_q2_K) == 84);
static_assert(sizeof(block_q3_K) == 110);
static_assert(sizeof(block_q4_K) == 144);
static_assert(sizeof(block_q5_K) == 176);
static_assert(sizeof(block_q6_K) == 210);
static_assert(sizeof(block_q8_K) == 292);
static_assert(sizeof(block_mxfp4) == 17);
static_assert(sizeof(block_iq4_nl) == 18);
static_assert(sizeof(block_iq4_xs) == 136);
static_assert(sizeof(block_iq2_xxs) == 66);
static_assert(sizeof(block_iq2_xs) == 74);
static_assert(sizeof(block_iq2_s) == 82);
static_assert(sizeof(block_iq3_xxs) == 98);
static_assert(sizeof(block_iq3_s) == 110);
static_assert(sizeof(block_iq1_s) == 50);
static_assert(sizeof(block_iq1_m) == 56);

// The 6-bit scale and min of sub-block j (0..7) of a q4_K/q5_K block: bytes
// 0..3 hold scales 0..3 (low 6 bits), 4..7 mins 0..3; 8..11 hold the low
// nibbles of scales/mins 4..7, whose two high bits sit in the top bits of
// bytes 0..3 (scales) and 4..7 (mins).
inline void k4_scale_min(int j, const uint8_t* q, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// All eight at once: scale j (mins: min j) in byte j of *sc (*m), the same
// fields as k4_scale_min, for kernels that take them as a word.
[[gnu::always_inline]] inline void k4_scales_mins(const uint8_t* q, uint64_t* sc, uint64_t* m) {
  uint32_t w0, w1, w2;  // three word loads (a 12-byte copy can go through the stack)
  std::memcpy(&w0, q, 4);
  std::memcpy(&w1, q + 4, 4);
  std::memcpy(&w2, q + 8, 4);
  const uint32_t six = 0x3F3F3F3F, four = 0x0F0F0F0F, two = 0x03030303;
  *sc = (w0 & six) | static_cast<uint64_t>((w2 & four) | (((w0 >> 6) & two) << 4)) << 32;
  *m = (w1 & six) | static_cast<uint64_t>(((w2 >> 4) & four) | (((w1 >> 6) & two) << 4)) << 32;
}

// The inverse of k4_scale_min: the 12 bytes holding the 6-bit scales sc and
// mins m of the eight sub-blocks.
inline void k4_pack_scale_min(const uint8_t sc[8], const uint8_t m[8], uint8_t out[12]) {
  for (int j = 0; j < 4; ++j) {
    out[j] = static_cast<uint8_t>(sc[j] | ((sc[j + 4] >> 4) << 6));
    out[j + 4] = static_cast<uint8_t>(m[j] | ((m[j + 4] >> 4) << 6));
    out[j + 8] = static_cast<uint8_t>((sc[j + 4] & 0xF) | ((m[j + 4] & 0xF) << 4));
  }
}

// The 16 6-bit scales of a q3_K block, bias 32 removed: scale i has its low
// nibble in byte i (i < 8, low nibble) or byte i - 8 (high nibble), and its two
// high bits in byte 8 + i % 4 at bit 2 * (i / 4).
inline void q3k_scales(const uint8_t* s, int8_t out[16]) {
  for (int i = 0; i < 16; ++i) {
    int lo = i < 8 ? (s[i] & 0xF) : (s[i - 8] >> 4);
    int hi = (s[8 + i % 4] >> (2 * (i / 4))) & 3;
    out[i] = static_cast<int8_t>((lo | (hi << 4)) - 32);
  }
}

// The inverse of q3k_scales: scales in -32..31 into the 12 bytes.
inline void q3k_pack_scales(const int8_t sc[16], uint8_t out[12]) {
  for (int i = 0; i < 12; ++i) out[i] = 0;
  for (int i = 0; i < 16; ++i) {
    const int l = sc[i] + 32;
    if (i < 8)
      out[i] = static_cast<uint8_t>(out[i] | (l & 0xF));
    else
      out[i - 8] = static_cast<uint8_t>(out[i - 8] | ((l & 0xF) << 4));
    out[8 + i % 4] = static_cast<uint8_t>(out[8 + i % 4] | ((l >> 4) << (2 * (i / 4))));
  }
}

}  // namespace colibri
