// NEON dot kernels for every weight type, shared by the plain ARMv8 build
// (neon.cpp: Cortex-A53/A55 class) and the dotprod build (neon_dotprod.cpp).
//
// With the dots, the prompt tiles of the super-block types (tile_sb), which
// every level runs on its integer dot and the i8mm level on smmla.
//
// Included by exactly one .cpp per level, each compiled with its own -march;
// everything here has internal linkage so the builds never merge. With
// CLB_ARM_DOTPROD the int8 products use sdot, otherwise smull + sadalp.
//
// Each dot computes the scalar reference's per-block integer sums exactly, so
// every level gives the same integers; the float part is the same instruction
// sequence at every level (and in the i8mm tiles), so the levels agree bit
// for bit and only the order of the float additions differs from the
// reference.
#pragma once

#include <arm_neon.h>

#include <array>
#include <cstring>
#include <type_traits>

#include "tensor/half.h"
#include "tensor/iq_grids.h"
#include "tensor/kernels/kernel_table.h"
#include "tensor/quant_blocks.h"

#ifndef CLB_ARM_DOTPROD
#error "define CLB_ARM_DOTPROD before including neon_common.h"
#endif

namespace colibri {
namespace {

// acc's int32 lanes + the 16 products a[i] * b[i] (each lane a sum of four
// of them; which four differs between the levels, the total does not).
inline int32x4_t idot(int32x4_t acc, int8x16_t a, int8x16_t b) {
#if CLB_ARM_DOTPROD
  return vdotq_s32(acc, a, b);
#else
  acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(a), vget_low_s8(b)));
  return vpadalq_s16(acc, vmull_high_s8(a, b));
#endif
}

inline int8x16_t s8(uint8x16_t v) {
  return vreinterpretq_s8_u8(v);
}

// Four halves (the scales of four blocks) as floats; exact, subnormals too.
inline float32x4_t h2f4(uint16_t a, uint16_t b, uint16_t c, uint16_t d) {
  const uint16_t h[4] = {a, b, c, d};
  return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(h)));
}
// One half as a float (fcvt: exact, subnormals too; half_to_float's value
// without its branches).
inline float h2f(uint16_t h) {
  return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h))), 0);
}

// 2^(e_k - 127) / 2 for four E8M0 exponents (e8m0_to_float_half's bits on
// four lanes): e < 2 are the denormals 2^-128 and 2^-127, the rest (e - 1)
// << 23 (255 gives 2^127, as in ggml).
inline float32x4_t e8m0_half4(const uint8_t e[4]) {
  uint32_t packed;
  std::memcpy(&packed, e, 4);
  const uint32x4_t u = vmovl_u16(vget_low_u16(vmovl_u8(vcreate_u8(packed))));
  const uint32x4_t normal = vshlq_n_u32(vsubq_u32(u, vdupq_n_u32(1)), 23);
  const uint32x4_t denormal = vshlq_u32(vdupq_n_u32(0x00200000), vreinterpretq_s32_u32(u));
  return vreinterpretq_f32_u32(vbslq_u32(vcltq_u32(u, vdupq_n_u32(2)), denormal, normal));
}

// [sum s0, sum s1, sum s2, sum s3]: four blocks' integer dots in one vector.
inline int32x4_t sum4(int32x4_t s0, int32x4_t s1, int32x4_t s2, int32x4_t s3) {
  return vpaddq_s32(vpaddq_s32(s0, s1), vpaddq_s32(s2, s3));
}

// ---- the 32-element block types against q8_0 / q8_1 activations ----
//
// W::unpack gives a block's 32 weights as signed bytes in element order (lo:
// 0..15, hi: 16..31), the values the reference multiplies; W::scale the bits
// of its scale and W::scales4 four of them as floats (fp16 for every type
// but MXFP4's E8M0). A new 32-element type joins as one more W and a line in
// add_neon_int_dots.

// The scale of the types whose blocks carry an fp16 d.
struct HalfScale {
  using Scale = uint16_t;
  template <typename Block>
  static Scale scale(const Block& b) {
    return b.d;
  }
  static float32x4_t scales4(const Scale s[4]) { return h2f4(s[0], s[1], s[2], s[3]); }
};

// Bit j of the 32-bit qh (little-endian bytes) as 0x10 in byte j: the fifth
// bit of q5_0 / q5_1 weight j.
inline void fifth_bits(const uint8_t* qh, uint8x16_t& lo, uint8x16_t& hi) {
  static const uint8_t kBit[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
  const uint8x16_t bit = vld1q_u8(kBit), x10 = vdupq_n_u8(0x10);
  lo = vandq_u8(vtstq_u8(vcombine_u8(vdup_n_u8(qh[0]), vdup_n_u8(qh[1])), bit), x10);
  hi = vandq_u8(vtstq_u8(vcombine_u8(vdup_n_u8(qh[2]), vdup_n_u8(qh[3])), bit), x10);
}

struct Q4_0W : HalfScale {
  using Block = block_q4_0;
  static void unpack(const Block& b, int8x16_t& lo, int8x16_t& hi) {
    const uint8x16_t q = vld1q_u8(b.qs);
    lo = vsubq_s8(s8(vandq_u8(q, vdupq_n_u8(0x0F))), vdupq_n_s8(8));
    hi = vsubq_s8(s8(vshrq_n_u8(q, 4)), vdupq_n_s8(8));
  }
};

struct Q5_0W : HalfScale {
  using Block = block_q5_0;
  static void unpack(const Block& b, int8x16_t& lo, int8x16_t& hi) {
    const uint8x16_t q = vld1q_u8(b.qs);
    uint8x16_t h0, h1;
    fifth_bits(b.qh, h0, h1);
    lo = vsubq_s8(s8(vorrq_u8(vandq_u8(q, vdupq_n_u8(0x0F)), h0)), vdupq_n_s8(16));
    hi = vsubq_s8(s8(vorrq_u8(vshrq_n_u8(q, 4), h1)), vdupq_n_s8(16));
  }
};

struct Q8_0W : HalfScale {
  using Block = block_q8_0;
  static void unpack(const Block& b, int8x16_t& lo, int8x16_t& hi) {
    lo = vld1q_s8(b.qs);
    hi = vld1q_s8(b.qs + 16);
  }
};

// q4_1 / q5_1: unsigned weights q and a min m; the activations' s = d_x sum x
// carries the min's term.
struct Q4_1W : HalfScale {
  using Block = block_q4_1;
  static void unpack(const Block& b, int8x16_t& lo, int8x16_t& hi) {
    const uint8x16_t q = vld1q_u8(b.qs);
    lo = s8(vandq_u8(q, vdupq_n_u8(0x0F)));
    hi = s8(vshrq_n_u8(q, 4));
  }
};

struct Q5_1W : HalfScale {
  using Block = block_q5_1;
  static void unpack(const Block& b, int8x16_t& lo, int8x16_t& hi) {
    const uint8x16_t q = vld1q_u8(b.qs);
    uint8x16_t h0, h1;
    fifth_bits(b.qh, h0, h1);
    lo = s8(vorrq_u8(vandq_u8(q, vdupq_n_u8(0x0F)), h0));
    hi = s8(vorrq_u8(vshrq_n_u8(q, 4), h1));
  }
};

// 16 bytes of 4-bit codes through a 16-byte table (tbl): the values of the
// low nibbles (elements 0..15 of a 32-block) and of the high ones (16..31).
inline void table_nibbles(const int8_t* table, const uint8_t* qs, int8x16_t& lo, int8x16_t& hi) {
  const int8x16_t values = vld1q_s8(table);
  const uint8x16_t q = vld1q_u8(qs);
  lo = vqtbl1q_s8(values, vandq_u8(q, vdupq_n_u8(0x0F)));
  hi = vqtbl1q_s8(values, vshrq_n_u8(q, 4));
}

// MXFP4: the E2M1 codes through a table to kMxfp4Values, the int8 values the
// reference multiplies; the E8M0 exponent as the scale.
struct Mxfp4W {
  using Block = block_mxfp4;
  using Scale = uint8_t;
  static void unpack(const Block& b, int8x16_t& lo, int8x16_t& hi) {
    table_nibbles(kMxfp4Values, b.qs, lo, hi);
  }
  static Scale scale(const Block& b) { return b.e; }
  static float32x4_t scales4(const Scale e[4]) { return e8m0_half4(e); }
};

// IQ4_NL: the codes through a table to kIq4nlValues.
struct Iq4NlW : HalfScale {
  using Block = block_iq4_nl;
  static void unpack(const Block& b, int8x16_t& lo, int8x16_t& hi) {
    table_nibbles(kIq4nlValues, b.qs, lo, hi);
  }
};

template <typename W, typename X>
inline int32x4_t block_dot(const typename W::Block& w, const X& x) {
  int8x16_t lo, hi;
  W::unpack(w, lo, hi);
  return idot(idot(vdupq_n_s32(0), lo, vld1q_s8(x.qs)), hi, vld1q_s8(x.qs + 16));
}

// sum_b d_w d_x isum_b (+ m_w s_x for the types with a min), four blocks a
// step: lane k of the accumulator takes blocks k, k + 4, ...; blocks past the
// end are zeros with zero scales (d_x = 0: MXFP4's e = 0 is not a zero).
// Each lane's first term is the reference's d_w d_x isum_b to the bit (one
// rounding of an exact product; inf and NaN where the reference has them).
// The i8mm tiles (neon_i8mm.cpp) repeat this float sequence per (row,
// token), so their values equal this dot's.
template <typename W, typename X>
float dot_q32(const void* wv, const void* xv, int64_t n) {
  using Block = typename W::Block;
  constexpr bool kMin = sizeof(X) == sizeof(block_q8_1);
  const auto* w = static_cast<const Block*>(wv);
  const auto* x = static_cast<const X*>(xv);
  const int64_t nb = n / kQK;
  float32x4_t acc = vdupq_n_f32(0.0f);
  for (int64_t b = 0; b < nb; b += 4) {
    int32x4_t s[4];
    typename W::Scale dw[4] = {};
    uint16_t dx[4] = {}, mw[4] = {}, sx[4] = {};
    for (int k = 0; k < 4; ++k) {
      if (b + k < nb) {
        s[k] = block_dot<W>(w[b + k], x[b + k]);
        dw[k] = W::scale(w[b + k]);
        dx[k] = x[b + k].d;
        if constexpr (kMin) {
          mw[k] = w[b + k].m;
          sx[k] = x[b + k].s;
        }
      } else {
        s[k] = vdupq_n_s32(0);
      }
    }
    const float32x4_t scale = vmulq_f32(W::scales4(dw), h2f4(dx[0], dx[1], dx[2], dx[3]));
    acc = vfmaq_f32(acc, vcvtq_f32_s32(sum4(s[0], s[1], s[2], s[3])), scale);
    if constexpr (kMin)
      acc = vfmaq_f32(acc, h2f4(mw[0], mw[1], mw[2], mw[3]), h2f4(sx[0], sx[1], sx[2], sx[3]));
  }
  return vaddvq_f32(acc);
}

// ---- K-quants: one 256-element super-block a step ----

// sum_j bsums[j] * m[j / 2]: the 8 sub-block mins of q4_K / q5_K against the
// activations' sums of 32.
inline int32_t k4_min_sum(const block_q8_K& y, const uint8_t mn[8]) {
  const int16x8_t bs = vpaddq_s16(vld1q_s16(y.bsums), vld1q_s16(y.bsums + 8));
  const int16x8_t m = vreinterpretq_s16_u16(vmovl_u8(vld1_u8(mn)));
  return vaddvq_s32(vmlal_high_s16(vmull_s16(vget_low_s16(bs), vget_low_s16(m)), bs, m));
}

// q4_K and q5_K: chunk j of 32 bytes holds sub-blocks 2j (low nibbles) and
// 2j + 1 (high nibbles); q5_K adds bit 2j / 2j + 1 of qh[l] as 16.
template <bool kFifth>
float dot_k4(const uint8_t* qs, const uint8_t* qh, const uint8_t* packed_scales, uint16_t d_w,
             uint16_t dmin_w, const block_q8_K& y) {
  uint8_t sc[8], mn[8];
  uint64_t sc8, mn8;
  k4_scales_mins(packed_scales, &sc8, &mn8);
  std::memcpy(sc, &sc8, 8);
  std::memcpy(mn, &mn8, 8);
  const uint8x16_t m4 = vdupq_n_u8(0x0F), x10 = vdupq_n_u8(0x10);
  uint8x16_t h0 = vdupq_n_u8(0), h1 = vdupq_n_u8(0);
  if constexpr (kFifth) {
    h0 = vld1q_u8(qh);
    h1 = vld1q_u8(qh + 16);
  }
  int32x4_t acc = vdupq_n_s32(0);
  const int8_t* q8 = y.qs;
  for (int j = 0; j < 4; ++j, qs += 32, q8 += 64) {
    const uint8x16_t a = vld1q_u8(qs), b = vld1q_u8(qs + 16);
    uint8x16_t la = vandq_u8(a, m4), lb = vandq_u8(b, m4), ha = vshrq_n_u8(a, 4),
               hb = vshrq_n_u8(b, 4);
    if constexpr (kFifth) {
      const uint8x16_t ml = vdupq_n_u8(static_cast<uint8_t>(1 << (2 * j)));
      const uint8x16_t mh = vdupq_n_u8(static_cast<uint8_t>(2 << (2 * j)));
      la = vorrq_u8(la, vandq_u8(vtstq_u8(h0, ml), x10));
      lb = vorrq_u8(lb, vandq_u8(vtstq_u8(h1, ml), x10));
      ha = vorrq_u8(ha, vandq_u8(vtstq_u8(h0, mh), x10));
      hb = vorrq_u8(hb, vandq_u8(vtstq_u8(h1, mh), x10));
    }
    const int32x4_t pl =
        idot(idot(vdupq_n_s32(0), s8(la), vld1q_s8(q8)), s8(lb), vld1q_s8(q8 + 16));
    const int32x4_t ph =
        idot(idot(vdupq_n_s32(0), s8(ha), vld1q_s8(q8 + 32)), s8(hb), vld1q_s8(q8 + 48));
    acc = vmlaq_n_s32(acc, pl, sc[2 * j]);
    acc = vmlaq_n_s32(acc, ph, sc[2 * j + 1]);
  }
  const float d = h2f(d_w) * y.d;
  const float dmin = h2f(dmin_w) * y.d;
  return d * static_cast<float>(vaddvq_s32(acc)) - dmin * static_cast<float>(k4_min_sum(y, mn));
}

float dot_q4_K(const void* wv, const void* xv, int64_t n) {
  const auto* w = static_cast<const block_q4_K*>(wv);
  const auto* y = static_cast<const block_q8_K*>(xv);
  float sum = 0;
  for (int64_t i = 0; i < n / kQK_K; ++i)
    sum += dot_k4<false>(w[i].qs, nullptr, w[i].scales, w[i].d, w[i].dmin, y[i]);
  return sum;
}

float dot_q5_K(const void* wv, const void* xv, int64_t n) {
  const auto* w = static_cast<const block_q5_K*>(wv);
  const auto* y = static_cast<const block_q8_K*>(xv);
  float sum = 0;
  for (int64_t i = 0; i < n / kQK_K; ++i)
    sum += dot_k4<true>(w[i].qs, w[i].qh, w[i].scales, w[i].d, w[i].dmin, y[i]);
  return sum;
}

// q6_K: per 128-element half, ql byte l (< 32) holds weights l (low nibble)
// and l + 64 (high), ql byte 32 + l weights l + 32 and l + 96, and qh byte l
// their top two bits in bits 0-1, 2-3, 4-5, 6-7. Weights are u - 32 with u in
// 0..63: the dot takes u, then 32 * sum_g scale_g * bsum_g off.
float dot_q6_K(const void* wv, const void* xv, int64_t n) {
  const auto* w = static_cast<const block_q6_K*>(wv);
  const auto* y = static_cast<const block_q8_K*>(xv);
  const uint8x16_t m4 = vdupq_n_u8(0x0F), m3 = vdupq_n_u8(0x03);
  float sum = 0;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const int16x8_t s_lo = vmovl_s8(vld1_s8(w[i].scales)),
                    s_hi = vmovl_s8(vld1_s8(w[i].scales + 8));
    // Each group of 16's products in its own vector, their sums then in the
    // lanes of one vector a half (groups 8 half + 0..3, 4..7) against the
    // scales widened alike: the exact integer sum, with no scale broadcast
    // per group.
    int32x4_t acc = vdupq_n_s32(0);
    for (int half = 0; half < 2; ++half) {
      const uint8_t* ql = w[i].ql + 64 * half;
      const uint8_t* qh = w[i].qh + 32 * half;
      const int8_t* q8 = y[i].qs + 128 * half;
      int32x4_t g[8];  // group 2 q + k: quarter q of the half, bytes 16 k
      for (int k = 0; k < 2; ++k) {
        const uint8x16_t l0 = vld1q_u8(ql + 16 * k), l1 = vld1q_u8(ql + 32 + 16 * k);
        const uint8x16_t h = vld1q_u8(qh + 16 * k);
        const uint8x16_t u0 = vorrq_u8(vandq_u8(l0, m4), vshlq_n_u8(vandq_u8(h, m3), 4));
        const uint8x16_t u1 =
            vorrq_u8(vandq_u8(l1, m4), vshlq_n_u8(vandq_u8(vshrq_n_u8(h, 2), m3), 4));
        const uint8x16_t u2 =
            vorrq_u8(vshrq_n_u8(l0, 4), vshlq_n_u8(vandq_u8(vshrq_n_u8(h, 4), m3), 4));
        const uint8x16_t u3 = vorrq_u8(vshrq_n_u8(l1, 4), vshlq_n_u8(vshrq_n_u8(h, 6), 4));
        const int8_t* x = q8 + 16 * k;
        g[k] = idot(vdupq_n_s32(0), s8(u0), vld1q_s8(x));
        g[2 + k] = idot(vdupq_n_s32(0), s8(u1), vld1q_s8(x + 32));
        g[4 + k] = idot(vdupq_n_s32(0), s8(u2), vld1q_s8(x + 64));
        g[6 + k] = idot(vdupq_n_s32(0), s8(u3), vld1q_s8(x + 96));
      }
      const int16x8_t sc = half ? s_hi : s_lo;
      acc = vmlaq_s32(acc, sum4(g[0], g[1], g[2], g[3]), vmovl_s16(vget_low_s16(sc)));
      acc = vmlaq_s32(acc, sum4(g[4], g[5], g[6], g[7]), vmovl_high_s16(sc));
    }
    const int16x8_t b_lo = vld1q_s16(y[i].bsums), b_hi = vld1q_s16(y[i].bsums + 8);
    int32x4_t bs = vmull_s16(vget_low_s16(s_lo), vget_low_s16(b_lo));
    bs = vmlal_high_s16(bs, s_lo, b_lo);
    bs = vmlal_s16(bs, vget_low_s16(s_hi), vget_low_s16(b_hi));
    bs = vmlal_high_s16(bs, s_hi, b_hi);
    const int32_t isum = vaddvq_s32(acc) - 32 * vaddvq_s32(bs);
    sum += h2f(w[i].d) * y[i].d * static_cast<float>(isum);
  }
  return sum;
}

// IQ4_XS: per super-block the exact integer sum over its eight sub-blocks of
// (ls - 32) times the sub-block's dot, then one float product, as the x86
// kernels compute it.
float dot_iq4_xs(const void* wv, const void* xv, int64_t n) {
  const auto* w = static_cast<const block_iq4_xs*>(wv);
  const auto* y = static_cast<const block_q8_K*>(xv);
  float sum = 0;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int32x4_t acc = vdupq_n_s32(0);
    for (int ib = 0; ib < kQK_K / kQK; ++ib) {
      const int8_t* q8 = y[i].qs + kQK * ib;
      int8x16_t lo, hi;
      table_nibbles(kIq4nlValues, w[i].qs + 16 * ib, lo, hi);
      acc = vmlaq_n_s32(acc, idot(idot(vdupq_n_s32(0), lo, vld1q_s8(q8)), hi, vld1q_s8(q8 + 16)),
                        iq4_xs_scale(w[i], ib));
    }
    sum += h2f(w[i].d) * y[i].d * static_cast<float>(vaddvq_s32(acc));
  }
  return sum;
}

// ---- the codebook i-quants: two grid points a vector with their signs
// applied, the reference's integer sums per super-block and its float
// expression on them ----

inline uint32_t load_u32(const void* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// The byte masks of a sign byte (byte j 0xFF where bit j is set), and of the
// 7-bit fields of IQ2/IQ3_XXS (iq2_signs: the eighth sign the parity of the
// seven), as tables: one load where bit tests, and a popcount for the
// parity, took several instructions a group of 8 (tools/arm64-insns.sh).
constexpr std::array<uint64_t, 256> sign_masks() {
  std::array<uint64_t, 256> t{};
  for (int b = 0; b < 256; ++b)
    for (int j = 0; j < 8; ++j)
      if ((b >> j) & 1) t[b] |= uint64_t{0xFF} << (8 * j);
  return t;
}
constexpr std::array<uint64_t, 256> kSignMask = sign_masks();
constexpr std::array<uint64_t, 128> iq2_sign_masks() {
  std::array<uint64_t, 128> t{};
  for (uint32_t i = 0; i < 128; ++i) t[i] = kSignMask[iq2_signs(i)];
  return t;
}
constexpr std::array<uint64_t, 128> kIq2SignMask = iq2_sign_masks();
inline uint64_t sign_mask(uint8_t s) {
  return kSignMask[s];
}
inline uint64_t iq2_sign_mask(uint32_t field) {
  return kIq2SignMask[field & 127];
}

// Points p0, p1 (8 bytes each) with the signs of masks m0, m1.
inline int8x16_t iq_signed16(uint64_t p0, uint64_t p1, uint64_t m0, uint64_t m1) {
  const uint8x16_t v = vcombine_u8(vcreate_u8(p0), vcreate_u8(p1));
  const uint8x16_t neg = vcombine_u8(vcreate_u8(m0), vcreate_u8(m1));
  return s8(vsubq_u8(veorq_u8(v, neg), neg));
}
// Two 4-byte points as one 8-byte one.
inline uint64_t iq3_pair(const uint32_t* grid, uint32_t i0, uint32_t i1) {
  return grid[i0] | (static_cast<uint64_t>(grid[i1]) << 32);
}

// Sub-block ib of each type: its 32 signed weights and the scales (2 ls + 1)
// of its two halves.
struct Iq2XxsN {
  using Block = block_iq2_xxs;
  static constexpr float kScale = 0.125f;
  static void sub(const Block& b, int ib, int8x16_t w[2], int ls[2]) {
    const uint64_t* g = iq_grids().iq2xxs;
    const uint32_t q = load_u32(b.qs + 4 * ib), sg = load_u32(b.qs + 4 * ib + 2);
    for (int h = 0; h < 2; ++h)
      w[h] = iq_signed16(g[(q >> (16 * h)) & 255], g[(q >> (16 * h + 8)) & 255],
                         iq2_sign_mask(sg >> (14 * h)), iq2_sign_mask(sg >> (14 * h + 7)));
    ls[0] = ls[1] = 2 * static_cast<int>(sg >> 28) + 1;
  }
};
struct Iq2XsN {
  using Block = block_iq2_xs;
  static constexpr float kScale = 0.125f;
  static void sub(const Block& b, int ib, int8x16_t w[2], int ls[2]) {
    const uint64_t* g = iq_grids().iq2xs;
    const uint16_t* q = b.qs + 4 * ib;
    for (int h = 0; h < 2; ++h)
      w[h] = iq_signed16(g[q[2 * h] & 511], g[q[2 * h + 1] & 511], iq2_sign_mask(q[2 * h] >> 9),
                         iq2_sign_mask(q[2 * h + 1] >> 9));
    ls[0] = 2 * (b.scales[ib] & 0xF) + 1;
    ls[1] = 2 * (b.scales[ib] >> 4) + 1;
  }
};
struct Iq2SN {
  using Block = block_iq2_s;
  static constexpr float kScale = 0.125f;
  static void sub(const Block& b, int ib, int8x16_t w[2], int ls[2]) {
    const uint64_t* g = iq_grids().iq2s;
    const uint8_t* qs = b.qs + 4 * ib;
    const uint8_t* sg = b.qs + kQK_K / 8 + 4 * ib;
    const uint32_t qh = b.qh[ib];
    auto idx = [&](int l) { return qs[l] | ((qh << (8 - 2 * l)) & 0x300); };
    for (int h = 0; h < 2; ++h)
      w[h] = iq_signed16(g[idx(2 * h)], g[idx(2 * h + 1)], sign_mask(sg[2 * h]),
                         sign_mask(sg[2 * h + 1]));
    ls[0] = 2 * (b.scales[ib] & 0xF) + 1;
    ls[1] = 2 * (b.scales[ib] >> 4) + 1;
  }
};
struct Iq3XxsN {
  using Block = block_iq3_xxs;
  static constexpr float kScale = 0.25f;
  static void sub(const Block& b, int ib, int8x16_t w[2], int ls[2]) {
    const uint32_t* g = iq_grids().iq3xxs;
    const uint8_t* qs = b.qs + 8 * ib;
    const uint32_t sg = load_u32(b.qs + kQK_K / 4 + 4 * ib);
    for (int h = 0; h < 2; ++h)
      w[h] = iq_signed16(iq3_pair(g, qs[4 * h], qs[4 * h + 1]),
                         iq3_pair(g, qs[4 * h + 2], qs[4 * h + 3]), iq2_sign_mask(sg >> (14 * h)),
                         iq2_sign_mask(sg >> (14 * h + 7)));
    ls[0] = ls[1] = 2 * static_cast<int>(sg >> 28) + 1;
  }
};
struct Iq3SN {
  using Block = block_iq3_s;
  static constexpr float kScale = 1.0f;
  static void sub(const Block& b, int ib, int8x16_t w[2], int ls[2]) {
    const uint32_t* g = iq_grids().iq3s;
    const uint8_t* qs = b.qs + 8 * ib;
    const uint32_t qh = b.qh[ib];
    auto idx = [&](int k) { return qs[k] | (((qh >> k) & 1) << 8); };
    for (int h = 0; h < 2; ++h)
      w[h] = iq_signed16(
          iq3_pair(g, idx(4 * h), idx(4 * h + 1)), iq3_pair(g, idx(4 * h + 2), idx(4 * h + 3)),
          sign_mask(b.signs[4 * ib + 2 * h]), sign_mask(b.signs[4 * ib + 2 * h + 1]));
    ls[0] = ls[1] = 2 * ((b.scales[ib / 2] >> (4 * (ib % 2))) & 0xF) + 1;
  }
};

template <typename D>
float dot_iq_grid(const void* wv, const void* xv, int64_t n) {
  const auto* w = static_cast<const typename D::Block*>(wv);
  const auto* y = static_cast<const block_q8_K*>(xv);
  float sum = 0;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int32x4_t acc = vdupq_n_s32(0);
    for (int ib = 0; ib < kQK_K / kQK; ++ib) {
      int8x16_t q[2];
      int ls[2];
      D::sub(w[i], ib, q, ls);
      const int8_t* q8 = y[i].qs + kQK * ib;
      acc = vmlaq_n_s32(acc, idot(vdupq_n_s32(0), q[0], vld1q_s8(q8)), ls[0]);
      acc = vmlaq_n_s32(acc, idot(vdupq_n_s32(0), q[1], vld1q_s8(q8 + 16)), ls[1]);
    }
    sum += h2f(w[i].d) * y[i].d * static_cast<float>(vaddvq_s32(acc));
  }
  return D::kScale * sum;
}

// IQ1: the points' -1, 0, 1 as int8; the shift's term through bsums (IQ1_S)
// or a +-1 vector per group of 8 (IQ1_M).
float dot_iq1_s(const void* wv, const void* xv, int64_t n) {
  const auto* w = static_cast<const block_iq1_s*>(wv);
  const auto* y = static_cast<const block_q8_K*>(xv);
  const uint64_t* g = iq_grids().iq1s;
  float sum = 0;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int32x4_t acc = vdupq_n_s32(0);
    int sumi1 = 0;
    for (int ib = 0; ib < kQK_K / kQK; ++ib) {
      const uint8_t* qs = w[i].qs + 4 * ib;
      const uint32_t qh = w[i].qh[ib];
      auto point = [&](int l) { return g[qs[l] | (((qh >> (3 * l)) & 7) << 8)]; };
      const int8_t* q8 = y[i].qs + kQK * ib;
      const int ls = 2 * static_cast<int>((qh >> 12) & 7) + 1;
      int32x4_t s = idot(vdupq_n_s32(0), s8(vcombine_u8(vcreate_u8(point(0)), vcreate_u8(point(1)))), vld1q_s8(q8));
      s = idot(s, s8(vcombine_u8(vcreate_u8(point(2)), vcreate_u8(point(3)))), vld1q_s8(q8 + 16));
      acc = vmlaq_n_s32(acc, s, ls);
      const int bs = y[i].bsums[2 * ib] + y[i].bsums[2 * ib + 1];
      sumi1 += qh & 0x8000 ? -ls * bs : ls * bs;
    }
    sum += h2f(w[i].d) * y[i].d *
           (static_cast<float>(vaddvq_s32(acc)) + kIq1Delta * static_cast<float>(sumi1));
  }
  return sum;
}

float dot_iq1_m(const void* wv, const void* xv, int64_t n) {
  const auto* w = static_cast<const block_iq1_m*>(wv);
  const auto* y = static_cast<const block_q8_K*>(xv);
  const uint64_t* g = iq_grids().iq1s;
  float sum = 0;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    uint16_t sc[4];
    iq1_m_scale_words(w[i], sc);
    int32x4_t acc1 = vdupq_n_s32(0), acc2 = vdupq_n_s32(0);
    for (int ib = 0; ib < kQK_K / kQK; ++ib) {
      const uint8_t* qs = w[i].qs + 4 * ib;
      const int8_t* q8 = y[i].qs + kQK * ib;
      const int s = sc[ib / 2] >> (6 * (ib % 2));
      for (int h = 0; h < 2; ++h) {
        const uint32_t qh = w[i].qh[2 * ib + h];
        const uint64_t p0 = g[qs[2 * h] | ((qh << 8) & 0x700)], p1 = g[qs[2 * h + 1] | ((qh << 4) & 0x700)];
        const int8x16_t delta =
            vcombine_s8(vdup_n_s8(qh & 0x08 ? -1 : 1), vdup_n_s8(qh & 0x80 ? -1 : 1));
        const int8x16_t x = vld1q_s8(q8 + 16 * h);
        const int ls = 2 * ((s >> (3 * h)) & 7) + 1;
        acc1 = vmlaq_n_s32(acc1, idot(vdupq_n_s32(0), s8(vcombine_u8(vcreate_u8(p0), vcreate_u8(p1))), x), ls);
        acc2 = vmlaq_n_s32(acc2, idot(vdupq_n_s32(0), delta, x), ls);
      }
    }
    sum +=
        h2f(iq1_m_d(sc)) * y[i].d *
        (static_cast<float>(vaddvq_s32(acc1)) + kIq1Delta * static_cast<float>(vaddvq_s32(acc2)));
  }
  return sum;
}

// q2_K: 16 sub-blocks of 16; scale byte j holds the sub-block's scale (low
// nibble) and min (high). Chunk k (32 bytes) holds 4 x 32 weights at shifts
// 0, 2, 4, 6.
float dot_q2_K(const void* wv, const void* xv, int64_t n) {
  const auto* w = static_cast<const block_q2_K*>(wv);
  const auto* y = static_cast<const block_q8_K*>(xv);
  const uint8x16_t m3 = vdupq_n_u8(0x03);
  float sum = 0;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const uint8x16_t sc = vld1q_u8(w[i].scales);
    const int16x8_t mn_lo = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(vshrq_n_u8(sc, 4))));
    const int16x8_t mn_hi = vreinterpretq_s16_u16(vmovl_high_u8(vshrq_n_u8(sc, 4)));
    const int16x8_t b_lo = vld1q_s16(y[i].bsums), b_hi = vld1q_s16(y[i].bsums + 8);
    int32x4_t ms = vmull_s16(vget_low_s16(mn_lo), vget_low_s16(b_lo));
    ms = vmlal_high_s16(ms, mn_lo, b_lo);
    ms = vmlal_s16(ms, vget_low_s16(mn_hi), vget_low_s16(b_hi));
    ms = vmlal_high_s16(ms, mn_hi, b_hi);
    uint8_t scale[16];
    vst1q_u8(scale, vandq_u8(sc, vdupq_n_u8(0x0F)));
    int32x4_t acc = vdupq_n_s32(0);
    const int8_t* q8 = y[i].qs;
    int is = 0;
    for (int k = 0; k < 2; ++k) {
      const uint8x16_t q0 = vld1q_u8(w[i].qs + 32 * k), q1 = vld1q_u8(w[i].qs + 32 * k + 16);
      for (int s = 0; s < 4; ++s, q8 += 32, is += 2) {
        const int8x16_t shift = vdupq_n_s8(static_cast<int8_t>(-2 * s));
        const uint8x16_t u0 = vandq_u8(vshlq_u8(q0, shift), m3),
                         u1 = vandq_u8(vshlq_u8(q1, shift), m3);
        acc = vmlaq_n_s32(acc, idot(vdupq_n_s32(0), s8(u0), vld1q_s8(q8)), scale[is]);
        acc = vmlaq_n_s32(acc, idot(vdupq_n_s32(0), s8(u1), vld1q_s8(q8 + 16)), scale[is + 1]);
      }
    }
    const float dall = y[i].d * h2f(w[i].d);
    const float dmin = y[i].d * h2f(w[i].dmin);
    sum += dall * static_cast<float>(vaddvq_s32(acc)) - dmin * static_cast<float>(vaddvq_s32(ms));
  }
  return sum;
}

// q3_K: weight = 2 low bits from qs - (hmask bit clear ? 4 : 0), 16
// sub-blocks of 16 with signed 6-bit scales.
float dot_q3_K(const void* wv, const void* xv, int64_t n) {
  const auto* w = static_cast<const block_q3_K*>(wv);
  const auto* y = static_cast<const block_q8_K*>(xv);
  const uint8x16_t m3 = vdupq_n_u8(0x03), four = vdupq_n_u8(4);
  float sum = 0;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int8_t scale[16];
    q3k_scales(w[i].scales, scale);
    const uint8x16_t hm0 = vld1q_u8(w[i].hmask), hm1 = vld1q_u8(w[i].hmask + 16);
    int32x4_t acc = vdupq_n_s32(0);
    const int8_t* q8 = y[i].qs;
    int is = 0;
    for (int half = 0; half < 2; ++half) {
      const uint8x16_t q0 = vld1q_u8(w[i].qs + 32 * half), q1 = vld1q_u8(w[i].qs + 32 * half + 16);
      for (int s = 0; s < 4; ++s, q8 += 32, is += 2) {
        const int8x16_t shift = vdupq_n_s8(static_cast<int8_t>(-2 * s));
        const uint8x16_t m = vdupq_n_u8(static_cast<uint8_t>(1 << (4 * half + s)));
        const int8x16_t w0 =
            vsubq_s8(s8(vandq_u8(vshlq_u8(q0, shift), m3)), s8(vbicq_u8(four, vtstq_u8(hm0, m))));
        const int8x16_t w1 =
            vsubq_s8(s8(vandq_u8(vshlq_u8(q1, shift), m3)), s8(vbicq_u8(four, vtstq_u8(hm1, m))));
        acc = vmlaq_n_s32(acc, idot(vdupq_n_s32(0), w0, vld1q_s8(q8)), scale[is]);
        acc = vmlaq_n_s32(acc, idot(vdupq_n_s32(0), w1, vld1q_s8(q8 + 16)), scale[is + 1]);
      }
    }
    sum += h2f(w[i].d) * y[i].d * static_cast<float>(vaddvq_s32(acc));
  }
  return sum;
}

// ---- prompt tiles of the super-block types: two rows decoded once for up
// to 8 tokens ----
//
// A decoder D gives sub-block ib (32 weights) of a 256-weight super-block as
// two 16-byte vectors of the integers its dot multiplies and the integer
// scale of each half (D::sub, after D::prepare has unpacked what the whole
// super-block shares), and the super-block's float term for the four (row,
// token) pairs from their exact integer sums (D::finish): the expression the
// dot above evaluates, lane by lane, so every (row, token) gets that dot's
// value to the bit. Types with a second integer sum (IQ1_M's
// shifts) set kDelta and give its vectors too.

// [a, a, b, b] of two fp16 values (exact, as half_to_float) and [a, b, a, b]:
// a value per row, a value per token.
inline float32x4_t per_row(uint16_t a, uint16_t b) {
  return h2f4(a, a, b, b);
}
inline float32x4_t per_token(float a, float b) {
  const float32x2_t v = vset_lane_f32(b, vdup_n_f32(a), 1);
  return vcombine_f32(v, v);
}

// [r0t0, r0t1, r1t0, r1t1] of sum_g a_r[g] * b_t[g] over 8 (or 16: hi too)
// int16 lanes.
inline int32x4_t dot8(int16x8_t a, int16x8_t b) {
  return vmlal_high_s16(vmull_s16(vget_low_s16(a), vget_low_s16(b)), a, b);
}
inline int32x4_t pair_sums(const int16x8_t a[2], const int16x8_t b[2]) {
  return vpaddq_s32(vpaddq_s32(dot8(a[0], b[0]), dot8(a[0], b[1])),
                    vpaddq_s32(dot8(a[1], b[0]), dot8(a[1], b[1])));
}
inline int32x4_t pair_sums16(const int16x8_t a_lo[2], const int16x8_t a_hi[2],
                             const int16x8_t b_lo[2], const int16x8_t b_hi[2]) {
  auto d16 = [](int16x8_t al, int16x8_t ah, int16x8_t bl, int16x8_t bh) {
    return vmlal_high_s16(vmlal_s16(dot8(al, bl), vget_low_s16(ah), vget_low_s16(bh)), ah, bh);
  };
  return vpaddq_s32(
      vpaddq_s32(d16(a_lo[0], a_hi[0], b_lo[0], b_hi[0]), d16(a_lo[0], a_hi[0], b_lo[1], b_hi[1])),
      vpaddq_s32(d16(a_lo[1], a_hi[1], b_lo[0], b_hi[0]), d16(a_lo[1], a_hi[1], b_lo[1], b_hi[1])));
}
// A token's 16 sums of 16 activations, and its 8 sums of 32 (k4_min_sum's).
inline void bsums16(const block_q8_K& y, int16x8_t& lo, int16x8_t& hi) {
  lo = vld1q_s16(y.bsums);
  hi = vld1q_s16(y.bsums + 8);
}
inline int16x8_t bsums32(const block_q8_K& y) {
  return vpaddq_s16(vld1q_s16(y.bsums), vld1q_s16(y.bsums + 8));
}
inline int16x8_t widen8(const uint8_t v[8]) {
  return vreinterpretq_s16_u16(vmovl_u8(vld1_u8(v)));
}
// d_w d_x for the four pairs (the dots' half_to_float(d) * y.d).
template <typename Block>
inline float32x4_t d_products(const Block& b0, const Block& b1, const block_q8_K& y0,
                              const block_q8_K& y1) {
  return vmulq_f32(per_row(b0.d, b1.d), per_token(y0.d, y1.d));
}

struct NoPrep {};

// A decoder's defaults: nothing unpacked per super-block, no second product,
// and the float term d_w d_x isum (the dots' half_to_float(d) * y.d * isum).
template <typename B>
struct SbDecoder {
  using Block = B;
  static constexpr bool kDelta = false;
  using Prep = NoPrep;
  static void prepare(const Block&, Prep&) {}
  template <typename P>
  static float32x4_t finish(const Block& b0, const Block& b1, const P&, const P&,
                            const block_q8_K& y0, const block_q8_K& y1, int32x4_t isum) {
    return vmulq_f32(d_products(b0, b1, y0, y1), vcvtq_f32_s32(isum));
  }
};

// q4_K / q5_K (dot_k4): sub-block ib is the low (even ib) or high nibbles of
// 32-byte chunk ib / 2, q5_K's bit ib of qh as 16; d sc isum - dmin m sum.
template <bool kFifth>
struct K4T : SbDecoder<std::conditional_t<kFifth, block_q5_K, block_q4_K>> {
  using Block = std::conditional_t<kFifth, block_q5_K, block_q4_K>;
  struct Prep {
    uint8_t sc[8], mn[8];
  };
  static void prepare(const Block& b, Prep& p) {
    uint64_t sc, mn;
    k4_scales_mins(b.scales, &sc, &mn);
    std::memcpy(p.sc, &sc, 8);
    std::memcpy(p.mn, &mn, 8);
  }
  static void sub(const Block& b, const Prep& p, int ib, int8x16_t w[2], int ls[2]) {
    const uint8_t* qs = b.qs + 32 * (ib / 2);
    uint8x16_t a = vld1q_u8(qs), c = vld1q_u8(qs + 16);
    if (ib % 2 == 0) {
      a = vandq_u8(a, vdupq_n_u8(0x0F));
      c = vandq_u8(c, vdupq_n_u8(0x0F));
    } else {
      a = vshrq_n_u8(a, 4);
      c = vshrq_n_u8(c, 4);
    }
    if constexpr (kFifth) {
      const uint8x16_t bit = vdupq_n_u8(static_cast<uint8_t>(1 << ib)), x10 = vdupq_n_u8(0x10);
      a = vorrq_u8(a, vandq_u8(vtstq_u8(vld1q_u8(b.qh), bit), x10));
      c = vorrq_u8(c, vandq_u8(vtstq_u8(vld1q_u8(b.qh + 16), bit), x10));
    }
    w[0] = s8(a);
    w[1] = s8(c);
    ls[0] = ls[1] = p.sc[ib];
  }
  static float32x4_t finish(const Block& b0, const Block& b1, const Prep& p0, const Prep& p1,
                            const block_q8_K& y0, const block_q8_K& y1, int32x4_t isum) {
    const int16x8_t m[2] = {widen8(p0.mn), widen8(p1.mn)}, bs[2] = {bsums32(y0), bsums32(y1)};
    const float32x4_t yd = per_token(y0.d, y1.d);
    const float32x4_t d = vmulq_f32(per_row(b0.d, b1.d), yd);
    const float32x4_t dmin = vmulq_f32(per_row(b0.dmin, b1.dmin), yd);
    return vsubq_f32(vmulq_f32(d, vcvtq_f32_s32(isum)),
                     vmulq_f32(dmin, vcvtq_f32_s32(pair_sums(m, bs))));
  }
};

// q6_K (dot_q6_K): sub-block ib is quarter ib % 4 of half ib / 4: low (0, 1)
// or high (2, 3) nibbles of ql bytes 0..31 (0, 2) or 32..63 (1, 3), with bits
// 2 (ib % 4) of qh; isum - 32 sum_g sc_g bsum_g.
struct Q6KT : SbDecoder<block_q6_K> {
  static void sub(const Block& b, const Prep&, int ib, int8x16_t w[2], int ls[2]) {
    const int q = ib % 4;
    const uint8_t* ql = b.ql + 64 * (ib / 4) + 32 * (q & 1);
    const uint8_t* qh = b.qh + 32 * (ib / 4);
    const int8x16_t shift = vdupq_n_s8(static_cast<int8_t>(-2 * q));
    for (int k = 0; k < 2; ++k) {
      const uint8x16_t l = vld1q_u8(ql + 16 * k);
      const uint8x16_t lo = q < 2 ? vandq_u8(l, vdupq_n_u8(0x0F)) : vshrq_n_u8(l, 4);
      const uint8x16_t hi = vandq_u8(vshlq_u8(vld1q_u8(qh + 16 * k), shift), vdupq_n_u8(0x03));
      w[k] = s8(vorrq_u8(lo, vshlq_n_u8(hi, 4)));
      ls[k] = b.scales[2 * ib + k];
    }
  }
  static float32x4_t finish(const Block& b0, const Block& b1, const Prep&, const Prep&,
                            const block_q8_K& y0, const block_q8_K& y1, int32x4_t isum) {
    const int16x8_t s_lo[2] = {vmovl_s8(vld1_s8(b0.scales)), vmovl_s8(vld1_s8(b1.scales))};
    const int16x8_t s_hi[2] = {vmovl_s8(vld1_s8(b0.scales + 8)), vmovl_s8(vld1_s8(b1.scales + 8))};
    int16x8_t b_lo[2], b_hi[2];
    bsums16(y0, b_lo[0], b_hi[0]);
    bsums16(y1, b_lo[1], b_hi[1]);
    const int32x4_t total = vsubq_s32(isum, vshlq_n_s32(pair_sums16(s_lo, s_hi, b_lo, b_hi), 5));
    return vmulq_f32(d_products(b0, b1, y0, y1), vcvtq_f32_s32(total));
  }
};

// q2_K (dot_q2_K): sub-block ib is bits 2 (ib % 4) of the 32-byte chunk
// ib / 4; its halves' scales the low nibbles of scales[2 ib], [2 ib + 1],
// the mins the high ones: dall isum - dmin sum_g m_g bsum_g.
struct Q2KT : SbDecoder<block_q2_K> {
  static void sub(const Block& b, const Prep&, int ib, int8x16_t w[2], int ls[2]) {
    const uint8_t* qs = b.qs + 32 * (ib / 4);
    const int8x16_t shift = vdupq_n_s8(static_cast<int8_t>(-2 * (ib % 4)));
    for (int k = 0; k < 2; ++k) {
      w[k] = s8(vandq_u8(vshlq_u8(vld1q_u8(qs + 16 * k), shift), vdupq_n_u8(0x03)));
      ls[k] = b.scales[2 * ib + k] & 0xF;
    }
  }
  static float32x4_t finish(const Block& b0, const Block& b1, const Prep&, const Prep&,
                            const block_q8_K& y0, const block_q8_K& y1, int32x4_t isum) {
    int16x8_t m_lo[2], m_hi[2], b_lo[2], b_hi[2];
    const Block* b[2] = {&b0, &b1};
    for (int r = 0; r < 2; ++r) {
      const uint8x16_t mn = vshrq_n_u8(vld1q_u8(b[r]->scales), 4);
      m_lo[r] = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(mn)));
      m_hi[r] = vreinterpretq_s16_u16(vmovl_high_u8(mn));
    }
    bsums16(y0, b_lo[0], b_hi[0]);
    bsums16(y1, b_lo[1], b_hi[1]);
    const float32x4_t yd = per_token(y0.d, y1.d);
    const float32x4_t dall = vmulq_f32(yd, per_row(b0.d, b1.d));
    const float32x4_t dmin = vmulq_f32(yd, per_row(b0.dmin, b1.dmin));
    return vsubq_f32(vmulq_f32(dall, vcvtq_f32_s32(isum)),
                     vmulq_f32(dmin, vcvtq_f32_s32(pair_sums16(m_lo, m_hi, b_lo, b_hi))));
  }
};

// q3_K (dot_q3_K): sub-block ib is bits 2 (ib % 4) of the 32-byte chunk
// ib / 4, less 4 where bit ib of its hmask byte is clear.
struct Q3KT : SbDecoder<block_q3_K> {
  struct Prep {
    int8_t sc[16];
  };
  static void prepare(const Block& b, Prep& p) { q3k_scales(b.scales, p.sc); }
  static void sub(const Block& b, const Prep& p, int ib, int8x16_t w[2], int ls[2]) {
    const uint8_t* qs = b.qs + 32 * (ib / 4);
    const int8x16_t shift = vdupq_n_s8(static_cast<int8_t>(-2 * (ib % 4)));
    const uint8x16_t m = vdupq_n_u8(static_cast<uint8_t>(1 << ib)), four = vdupq_n_u8(4);
    for (int k = 0; k < 2; ++k) {
      const uint8x16_t u = vandq_u8(vshlq_u8(vld1q_u8(qs + 16 * k), shift), vdupq_n_u8(0x03));
      w[k] = vsubq_s8(s8(u), s8(vbicq_u8(four, vtstq_u8(vld1q_u8(b.hmask + 16 * k), m))));
      ls[k] = p.sc[2 * ib + k];
    }
  }
};

// IQ4_XS (dot_iq4_xs): the codes through kIq4nlValues, scale ls - 32.
struct Iq4XsT : SbDecoder<block_iq4_xs> {
  static void sub(const Block& b, const Prep&, int ib, int8x16_t w[2], int ls[2]) {
    table_nibbles(kIq4nlValues, b.qs + 16 * ib, w[0], w[1]);
    ls[0] = ls[1] = iq4_xs_scale(b, ib);
  }
};

// The codebook i-quants (dot_iq_grid): their sub-blocks as the dot takes them.
template <typename N>
struct IqGridT : SbDecoder<typename N::Block> {
  using Block = typename N::Block;
  static void sub(const Block& b, const NoPrep&, int ib, int8x16_t w[2], int ls[2]) {
    N::sub(b, ib, w, ls);
  }
  static float32x4_t last(float32x4_t sum) { return vmulq_f32(vdupq_n_f32(N::kScale), sum); }
};

// IQ1_S (dot_iq1_s): the points' -1, 0, 1; the shift's term (sign bit 15
// of qh) is +-ls times the sub-block's 32-sum of activations.
struct Iq1ST : SbDecoder<block_iq1_s> {
  struct Prep {
    int16_t sls[8];
  };
  static void prepare(const Block& b, Prep& p) {
    for (int ib = 0; ib < 8; ++ib) {
      const int ls = 2 * static_cast<int>((b.qh[ib] >> 12) & 7) + 1;
      p.sls[ib] = static_cast<int16_t>(b.qh[ib] & 0x8000 ? -ls : ls);
    }
  }
  static void sub(const Block& b, const Prep&, int ib, int8x16_t w[2], int ls[2]) {
    const uint64_t* g = iq_grids().iq1s;
    const uint8_t* qs = b.qs + 4 * ib;
    const uint32_t qh = b.qh[ib];
    auto point = [&](int l) { return g[qs[l] | (((qh >> (3 * l)) & 7) << 8)]; };
    w[0] = s8(vcombine_u8(vcreate_u8(point(0)), vcreate_u8(point(1))));
    w[1] = s8(vcombine_u8(vcreate_u8(point(2)), vcreate_u8(point(3))));
    ls[0] = ls[1] = 2 * static_cast<int>((qh >> 12) & 7) + 1;
  }
  static float32x4_t finish(const Block& b0, const Block& b1, const Prep& p0, const Prep& p1,
                            const block_q8_K& y0, const block_q8_K& y1, int32x4_t isum) {
    const int16x8_t s[2] = {vld1q_s16(p0.sls), vld1q_s16(p1.sls)},
                    bs[2] = {bsums32(y0), bsums32(y1)};
    const float32x4_t shift = vmulq_f32(vdupq_n_f32(kIq1Delta), vcvtq_f32_s32(pair_sums(s, bs)));
    return vmulq_f32(d_products(b0, b1, y0, y1), vaddq_f32(vcvtq_f32_s32(isum), shift));
  }
};

// IQ1_M (dot_iq1_m): the points, and a +-1 vector per 8 weights (bits 3 and
// 7 of each qh byte) for the shifts, both at the half's scale.
struct Iq1MT : SbDecoder<block_iq1_m> {
  static constexpr bool kDelta = true;
  struct Prep {
    uint16_t sc[4];
  };
  static void prepare(const Block& b, Prep& p) { iq1_m_scale_words(b, p.sc); }
  static void sub(const Block& b, const Prep& p, int ib, int8x16_t w[2], int8x16_t delta[2],
                  int ls[2]) {
    const uint64_t* g = iq_grids().iq1s;
    const uint8_t* qs = b.qs + 4 * ib;
    const int s = p.sc[ib / 2] >> (6 * (ib % 2));
    for (int h = 0; h < 2; ++h) {
      const uint32_t qh = b.qh[2 * ib + h];
      const uint64_t p0 = g[qs[2 * h] | ((qh << 8) & 0x700)],
                     p1 = g[qs[2 * h + 1] | ((qh << 4) & 0x700)];
      w[h] = s8(vcombine_u8(vcreate_u8(p0), vcreate_u8(p1)));
      delta[h] = vcombine_s8(vdup_n_s8(qh & 0x08 ? -1 : 1), vdup_n_s8(qh & 0x80 ? -1 : 1));
      ls[h] = 2 * ((s >> (3 * h)) & 7) + 1;
    }
  }
  static float32x4_t finish(const Prep& p0, const Prep& p1, const block_q8_K& y0,
                            const block_q8_K& y1, int32x4_t isum, int32x4_t dsum) {
    const float32x4_t d = vmulq_f32(per_row(iq1_m_d(p0.sc), iq1_m_d(p1.sc)), per_token(y0.d, y1.d));
    return vmulq_f32(
        d, vaddq_f32(vcvtq_f32_s32(isum), vmulq_f32(vdupq_n_f32(kIq1Delta), vcvtq_f32_s32(dsum))));
  }
};

template <typename D>
concept HasLast = requires(float32x4_t s) {
  D::last(s);
};

// The P pairs' lanes [r0t0, r0t1, r1t0, r1t1] at y[t * y_stride + r].
template <typename D, int P>
inline void store_pairs(float32x4_t (&sum)[P], float* y, size_t y_stride) {
  for (int p = 0; p < P; ++p) {
    if constexpr (HasLast<D>) sum[p] = D::last(sum[p]);
    float* yp = y + 2 * p * y_stride;
    yp[0] = vgetq_lane_f32(sum[p], 0);
    yp[y_stride] = vgetq_lane_f32(sum[p], 1);
    yp[1] = vgetq_lane_f32(sum[p], 2);
    yp[y_stride + 1] = vgetq_lane_f32(sum[p], 3);
  }
}

// Two rows against P pairs of tokens on this level's integer dot (idot):
// per (row, token) a vector of partial sums, each sub-block's at its scale,
// reduced to the pairs' exact integer sums at the end of a super-block.
struct IdotStep {
  template <typename D, int P>
  static void run(const uint8_t* w, size_t w_stride, const uint8_t* x, size_t x_stride, int64_t nsb,
                  float* y, size_t y_stride) {
    using Block = typename D::Block;
    const Block* wr[2] = {reinterpret_cast<const Block*>(w),
                          reinterpret_cast<const Block*>(w + w_stride)};
    const block_q8_K* xt[2 * P];
    for (int t = 0; t < 2 * P; ++t) xt[t] = reinterpret_cast<const block_q8_K*>(x + t * x_stride);
    float32x4_t sum[P];
    for (int p = 0; p < P; ++p) sum[p] = vdupq_n_f32(0);
    for (int64_t i = 0; i < nsb; ++i) {
      typename D::Prep pr[2];
      D::prepare(wr[0][i], pr[0]);
      D::prepare(wr[1][i], pr[1]);
      int32x4_t acc[2][2 * P], dacc[2][2 * P];
      for (int r = 0; r < 2; ++r)
        for (int t = 0; t < 2 * P; ++t) acc[r][t] = dacc[r][t] = vdupq_n_s32(0);
      // Row r's sub-block ib (halves v[0], v[1] at scales ls) into `into`.
      auto add = [&](int32x4_t(&into)[2 * P], const int8x16_t v[2], const int ls[2], int ib) {
        for (int t = 0; t < 2 * P; ++t) {
          const int8_t* q8 = xt[t][i].qs + kQK * ib;
          const int32x4_t lo = idot(vdupq_n_s32(0), v[0], vld1q_s8(q8));
          if (ls[0] == ls[1]) {
            into[t] = vmlaq_n_s32(into[t], idot(lo, v[1], vld1q_s8(q8 + 16)), ls[0]);
          } else {
            into[t] = vmlaq_n_s32(into[t], lo, ls[0]);
            into[t] = vmlaq_n_s32(into[t], idot(vdupq_n_s32(0), v[1], vld1q_s8(q8 + 16)), ls[1]);
          }
        }
      };
      for (int ib = 0; ib < kQK_K / kQK; ++ib)
        for (int r = 0; r < 2; ++r) {
          int8x16_t v[2];
          int ls[2];
          if constexpr (D::kDelta) {
            int8x16_t dv[2];
            D::sub(wr[r][i], pr[r], ib, v, dv, ls);
            add(dacc[r], dv, ls, ib);
          } else {
            D::sub(wr[r][i], pr[r], ib, v, ls);
          }
          add(acc[r], v, ls, ib);
        }
      for (int p = 0; p < P; ++p) {
        const int t = 2 * p;
        const int32x4_t isum = sum4(acc[0][t], acc[0][t + 1], acc[1][t], acc[1][t + 1]);
        const block_q8_K& y0 = xt[t][i];
        const block_q8_K& y1 = xt[t + 1][i];
        if constexpr (D::kDelta)
          sum[p] = vaddq_f32(
              sum[p], D::finish(pr[0], pr[1], y0, y1, isum,
                                sum4(dacc[0][t], dacc[0][t + 1], dacc[1][t], dacc[1][t + 1])));
        else
          sum[p] = vaddq_f32(sum[p], D::finish(wr[0][i], wr[1][i], pr[0], pr[1], y0, y1, isum));
      }
    }
    store_pairs<D, P>(sum, y, y_stride);
  }
};

// kernel_table.h's TileFn over super-blocks: Step's tiles of 2 rows x 8
// tokens, then 4 and 2, and the type's dot for an odd last row or token.
template <typename D, DotFn kDot, typename Step>
void tile_sb(const uint8_t* w, size_t w_stride, int64_t nr, const uint8_t* x, size_t x_stride,
             int64_t nt, int64_t n, float* y, size_t y_stride) {
  const int64_t nsb = n / kQK_K;
  int64_t r = 0;
  for (; r + 2 <= nr; r += 2) {
    const uint8_t* wr = w + r * w_stride;
    int64_t t = 0;
    for (; t + 8 <= nt; t += 8)
      Step::template run<D, 4>(wr, w_stride, x + t * x_stride, x_stride, nsb, y + t * y_stride + r,
                               y_stride);
    for (; t + 4 <= nt; t += 4)
      Step::template run<D, 2>(wr, w_stride, x + t * x_stride, x_stride, nsb, y + t * y_stride + r,
                               y_stride);
    for (; t + 2 <= nt; t += 2)
      Step::template run<D, 1>(wr, w_stride, x + t * x_stride, x_stride, nsb, y + t * y_stride + r,
                               y_stride);
    for (; t < nt; ++t)
      for (int64_t i = r; i < r + 2; ++i)
        y[t * y_stride + i] = kDot(w + i * w_stride, x + t * x_stride, n);
  }
  for (; r < nr; ++r)
    for (int64_t t = 0; t < nt; ++t)
      y[t * y_stride + r] = kDot(w + r * w_stride, x + t * x_stride, n);
}

// The super-block types' tiles on Step (IdotStep here, smmla in
// neon_i8mm.cpp).
template <typename Step>
inline void add_neon_sb_tiles(KernelTable& t) {
  t.tile[slot(DType::Q2_K)] = tile_sb<Q2KT, dot_q2_K, Step>;
  t.tile[slot(DType::Q3_K)] = tile_sb<Q3KT, dot_q3_K, Step>;
  t.tile[slot(DType::Q4_K)] = tile_sb<K4T<false>, dot_q4_K, Step>;
  t.tile[slot(DType::Q5_K)] = tile_sb<K4T<true>, dot_q5_K, Step>;
  t.tile[slot(DType::Q6_K)] = tile_sb<Q6KT, dot_q6_K, Step>;
  t.tile[slot(DType::IQ4_XS)] = tile_sb<Iq4XsT, dot_iq4_xs, Step>;
  t.tile[slot(DType::IQ2_XXS)] = tile_sb<IqGridT<Iq2XxsN>, dot_iq_grid<Iq2XxsN>, Step>;
  t.tile[slot(DType::IQ2_XS)] = tile_sb<IqGridT<Iq2XsN>, dot_iq_grid<Iq2XsN>, Step>;
  t.tile[slot(DType::IQ2_S)] = tile_sb<IqGridT<Iq2SN>, dot_iq_grid<Iq2SN>, Step>;
  t.tile[slot(DType::IQ3_XXS)] = tile_sb<IqGridT<Iq3XxsN>, dot_iq_grid<Iq3XxsN>, Step>;
  t.tile[slot(DType::IQ3_S)] = tile_sb<IqGridT<Iq3SN>, dot_iq_grid<Iq3SN>, Step>;
  t.tile[slot(DType::IQ1_S)] = tile_sb<Iq1ST, dot_iq1_s, Step>;
  t.tile[slot(DType::IQ1_M)] = tile_sb<Iq1MT, dot_iq1_m, Step>;
}

// The super-block types' dots (against q8_K).
inline void add_neon_sb_dots(KernelTable& t) {
  t.dot[slot(DType::Q2_K)] = dot_q2_K;
  t.dot[slot(DType::Q3_K)] = dot_q3_K;
  t.dot[slot(DType::Q4_K)] = dot_q4_K;
  t.dot[slot(DType::Q5_K)] = dot_q5_K;
  t.dot[slot(DType::Q6_K)] = dot_q6_K;
  t.dot[slot(DType::IQ4_XS)] = dot_iq4_xs;
  t.dot[slot(DType::IQ2_XXS)] = dot_iq_grid<Iq2XxsN>;
  t.dot[slot(DType::IQ2_XS)] = dot_iq_grid<Iq2XsN>;
  t.dot[slot(DType::IQ2_S)] = dot_iq_grid<Iq2SN>;
  t.dot[slot(DType::IQ3_XXS)] = dot_iq_grid<Iq3XxsN>;
  t.dot[slot(DType::IQ3_S)] = dot_iq_grid<Iq3SN>;
  t.dot[slot(DType::IQ1_S)] = dot_iq1_s;
  t.dot[slot(DType::IQ1_M)] = dot_iq1_m;
}

// ---- prompt tiles of the 32-weight block types on the integer dot: one row
// against up to 8 tokens ----
//
// Each block of the row is unpacked once for T tokens, and its float scales
// once a group of four blocks; per token the steps are dot_q32's (the four
// blocks' exact integer sums in the lanes of one vector, one fma at the
// product of the scales, the min's term, the same lane sum at the end), so
// every (row, token) gets the dot's value to the bit.
template <typename W, typename X, int T>
void row_tile_q32(const uint8_t* w, const uint8_t* x, size_t x_stride, int64_t nb, float* y,
                  size_t y_stride) {
  using Block = typename W::Block;
  constexpr bool kMin = sizeof(X) == sizeof(block_q8_1);
  const Block* wr = reinterpret_cast<const Block*>(w);
  const X* xt[T];
  for (int t = 0; t < T; ++t) xt[t] = reinterpret_cast<const X*>(x + t * x_stride);
  float32x4_t acc[T];
  for (int t = 0; t < T; ++t) acc[t] = vdupq_n_f32(0.0f);
  for (int64_t b = 0; b < nb; b += 4) {
    // lanes[t]: blocks 0, 1 pairwise (then 2, 3) as sum4 builds them.
    int32x4_t half[T], lanes[T];
    for (int t = 0; t < T; ++t) half[t] = lanes[t] = vdupq_n_s32(0);
    typename W::Scale dw[4] = {};
    uint16_t mw[4] = {};
    for (int k = 0; k < 4; ++k) {
      int32x4_t s[T];
      if (b + k < nb) {
        int8x16_t lo, hi;
        W::unpack(wr[b + k], lo, hi);
        dw[k] = W::scale(wr[b + k]);
        if constexpr (kMin) mw[k] = wr[b + k].m;
        for (int t = 0; t < T; ++t) {
          const X& xb = xt[t][b + k];
          s[t] = idot(idot(vdupq_n_s32(0), lo, vld1q_s8(xb.qs)), hi, vld1q_s8(xb.qs + 16));
        }
      } else {
        for (int t = 0; t < T; ++t) s[t] = vdupq_n_s32(0);
      }
      for (int t = 0; t < T; ++t) {
        if (k == 0)
          lanes[t] = s[t];
        else if (k == 1)
          half[t] = vpaddq_s32(lanes[t], s[t]);
        else if (k == 2)
          lanes[t] = s[t];
        else
          half[t] = vpaddq_s32(half[t], vpaddq_s32(lanes[t], s[t]));
      }
    }
    const float32x4_t fw = W::scales4(dw);
    for (int t = 0; t < T; ++t) {
      uint16_t dx[4] = {}, sx[4] = {};
      for (int k = 0; k < 4 && b + k < nb; ++k) {
        dx[k] = xt[t][b + k].d;
        if constexpr (kMin) sx[k] = xt[t][b + k].s;
      }
      acc[t] = vfmaq_f32(acc[t], vcvtq_f32_s32(half[t]),
                         vmulq_f32(fw, h2f4(dx[0], dx[1], dx[2], dx[3])));
      if constexpr (kMin)
        acc[t] =
            vfmaq_f32(acc[t], h2f4(mw[0], mw[1], mw[2], mw[3]), h2f4(sx[0], sx[1], sx[2], sx[3]));
    }
  }
  for (int t = 0; t < T; ++t) y[t * y_stride] = vaddvq_f32(acc[t]);
}

// kernel_table.h's TileFn for the 32-weight block types: each row against 8
// tokens at a time, then 4, 2 and the dot for the last one.
template <typename W, typename X>
void tile_q32(const uint8_t* w, size_t w_stride, int64_t nr, const uint8_t* x, size_t x_stride,
              int64_t nt, int64_t n, float* y, size_t y_stride) {
  const int64_t nb = n / kQK;
  for (int64_t r = 0; r < nr; ++r) {
    const uint8_t* wr = w + r * w_stride;
    int64_t t = 0;
    for (; t + 8 <= nt; t += 8)
      row_tile_q32<W, X, 8>(wr, x + t * x_stride, x_stride, nb, y + t * y_stride + r, y_stride);
    for (; t + 4 <= nt; t += 4)
      row_tile_q32<W, X, 4>(wr, x + t * x_stride, x_stride, nb, y + t * y_stride + r, y_stride);
    for (; t + 2 <= nt; t += 2)
      row_tile_q32<W, X, 2>(wr, x + t * x_stride, x_stride, nb, y + t * y_stride + r, y_stride);
    for (; t < nt; ++t) y[t * y_stride + r] = dot_q32<W, X>(wr, x + t * x_stride, n);
  }
}

// The integer dots of this level (the float dots, quantizers and attention do
// not depend on it: neon.cpp sets them once).
inline void add_neon_int_dots(KernelTable& t) {
  t.dot[slot(DType::Q4_0)] = dot_q32<Q4_0W, block_q8_0>;
  t.dot[slot(DType::Q5_0)] = dot_q32<Q5_0W, block_q8_0>;
  t.dot[slot(DType::Q8_0)] = dot_q32<Q8_0W, block_q8_0>;
  t.dot[slot(DType::Q4_1)] = dot_q32<Q4_1W, block_q8_1>;
  t.dot[slot(DType::Q5_1)] = dot_q32<Q5_1W, block_q8_1>;
  t.dot[slot(DType::MXFP4)] = dot_q32<Mxfp4W, block_q8_0>;
  t.dot[slot(DType::IQ4_NL)] = dot_q32<Iq4NlW, block_q8_0>;
  add_neon_sb_dots(t);
  t.tile[slot(DType::Q4_0)] = tile_q32<Q4_0W, block_q8_0>;
  t.tile[slot(DType::Q5_0)] = tile_q32<Q5_0W, block_q8_0>;
  t.tile[slot(DType::Q8_0)] = tile_q32<Q8_0W, block_q8_0>;
  t.tile[slot(DType::Q4_1)] = tile_q32<Q4_1W, block_q8_1>;
  t.tile[slot(DType::Q5_1)] = tile_q32<Q5_1W, block_q8_1>;
  t.tile[slot(DType::MXFP4)] = tile_q32<Mxfp4W, block_q8_0>;
  t.tile[slot(DType::IQ4_NL)] = tile_q32<Iq4NlW, block_q8_0>;
  add_neon_sb_tiles<IdotStep>(t);
}

}  // namespace
}  // namespace colibri
