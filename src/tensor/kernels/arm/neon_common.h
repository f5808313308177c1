// NEON dot kernels for every weight type, shared by the plain ARMv8 build
// (neon.cpp: Cortex-A53/A55 class) and the dotprod build (neon_dotprod.cpp).
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

#include <cstring>

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
  for (int j = 0; j < 8; ++j) k4_scale_min(j, packed_scales, &sc[j], &mn[j]);
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
  const float d = half_to_float(d_w) * y.d;
  const float dmin = half_to_float(dmin_w) * y.d;
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
    int32x4_t acc = vdupq_n_s32(0);
    for (int half = 0; half < 2; ++half) {
      const uint8_t* ql = w[i].ql + 64 * half;
      const uint8_t* qh = w[i].qh + 32 * half;
      const int8_t* sc = w[i].scales + 8 * half;
      const int8_t* q8 = y[i].qs + 128 * half;
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
        acc = vmlaq_n_s32(acc, idot(vdupq_n_s32(0), s8(u0), vld1q_s8(x)), sc[k]);
        acc = vmlaq_n_s32(acc, idot(vdupq_n_s32(0), s8(u1), vld1q_s8(x + 32)), sc[2 + k]);
        acc = vmlaq_n_s32(acc, idot(vdupq_n_s32(0), s8(u2), vld1q_s8(x + 64)), sc[4 + k]);
        acc = vmlaq_n_s32(acc, idot(vdupq_n_s32(0), s8(u3), vld1q_s8(x + 96)), sc[6 + k]);
      }
    }
    const int16x8_t s_lo = vmovl_s8(vld1_s8(w[i].scales)),
                    s_hi = vmovl_s8(vld1_s8(w[i].scales + 8));
    const int16x8_t b_lo = vld1q_s16(y[i].bsums), b_hi = vld1q_s16(y[i].bsums + 8);
    int32x4_t bs = vmull_s16(vget_low_s16(s_lo), vget_low_s16(b_lo));
    bs = vmlal_high_s16(bs, s_lo, b_lo);
    bs = vmlal_s16(bs, vget_low_s16(s_hi), vget_low_s16(b_hi));
    bs = vmlal_high_s16(bs, s_hi, b_hi);
    const int32_t isum = vaddvq_s32(acc) - 32 * vaddvq_s32(bs);
    sum += half_to_float(w[i].d) * y[i].d * static_cast<float>(isum);
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
    sum += half_to_float(w[i].d) * y[i].d * static_cast<float>(vaddvq_s32(acc));
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

// Points p0, p1 (8 bytes each) with the signs of sign bytes s0, s1.
inline int8x16_t iq_signed16(uint64_t p0, uint64_t p1, uint8_t s0, uint8_t s1) {
  static const uint8_t kBits[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
  const uint8x16_t v = vcombine_u8(vcreate_u8(p0), vcreate_u8(p1));
  const uint8x16_t neg = vtstq_u8(vcombine_u8(vdup_n_u8(s0), vdup_n_u8(s1)), vld1q_u8(kBits));
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
      w[h] = iq_signed16(g[(q >> (16 * h)) & 255], g[(q >> (16 * h + 8)) & 255], iq2_signs(sg >> (14 * h)),
                         iq2_signs(sg >> (14 * h + 7)));
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
      w[h] = iq_signed16(g[q[2 * h] & 511], g[q[2 * h + 1] & 511], iq2_signs(q[2 * h] >> 9),
                         iq2_signs(q[2 * h + 1] >> 9));
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
    for (int h = 0; h < 2; ++h) w[h] = iq_signed16(g[idx(2 * h)], g[idx(2 * h + 1)], sg[2 * h], sg[2 * h + 1]);
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
      w[h] = iq_signed16(iq3_pair(g, qs[4 * h], qs[4 * h + 1]), iq3_pair(g, qs[4 * h + 2], qs[4 * h + 3]),
                         iq2_signs(sg >> (14 * h)), iq2_signs(sg >> (14 * h + 7)));
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
      w[h] = iq_signed16(iq3_pair(g, idx(4 * h), idx(4 * h + 1)), iq3_pair(g, idx(4 * h + 2), idx(4 * h + 3)),
                         b.signs[4 * ib + 2 * h], b.signs[4 * ib + 2 * h + 1]);
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
    sum += half_to_float(w[i].d) * y[i].d * static_cast<float>(vaddvq_s32(acc));
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
    sum += half_to_float(w[i].d) * y[i].d *
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
    sum += half_to_float(iq1_m_d(sc)) * y[i].d *
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
    const float dall = y[i].d * half_to_float(w[i].d);
    const float dmin = y[i].d * half_to_float(w[i].dmin);
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
    sum += half_to_float(w[i].d) * y[i].d * static_cast<float>(vaddvq_s32(acc));
  }
  return sum;
}

// The integer dots of this level (the float dots, quantizers and attention do
// not depend on it: neon.cpp sets them once).
inline void add_neon_int_dots(KernelTable& t) {
  t.dot[slot(DType::Q4_0)] = dot_q32<Q4_0W, block_q8_0>;
  t.dot[slot(DType::Q5_0)] = dot_q32<Q5_0W, block_q8_0>;
  t.dot[slot(DType::Q8_0)] = dot_q32<Q8_0W, block_q8_0>;
  t.dot[slot(DType::Q4_1)] = dot_q32<Q4_1W, block_q8_1>;
  t.dot[slot(DType::Q5_1)] = dot_q32<Q5_1W, block_q8_1>;
  t.dot[slot(DType::Q2_K)] = dot_q2_K;
  t.dot[slot(DType::Q3_K)] = dot_q3_K;
  t.dot[slot(DType::Q4_K)] = dot_q4_K;
  t.dot[slot(DType::Q5_K)] = dot_q5_K;
  t.dot[slot(DType::Q6_K)] = dot_q6_K;
  t.dot[slot(DType::MXFP4)] = dot_q32<Mxfp4W, block_q8_0>;
  t.dot[slot(DType::IQ4_NL)] = dot_q32<Iq4NlW, block_q8_0>;
  t.dot[slot(DType::IQ4_XS)] = dot_iq4_xs;
  t.dot[slot(DType::IQ2_XXS)] = dot_iq_grid<Iq2XxsN>;
  t.dot[slot(DType::IQ2_XS)] = dot_iq_grid<Iq2XsN>;
  t.dot[slot(DType::IQ2_S)] = dot_iq_grid<Iq2SN>;
  t.dot[slot(DType::IQ3_XXS)] = dot_iq_grid<Iq3XxsN>;
  t.dot[slot(DType::IQ3_S)] = dot_iq_grid<Iq3SN>;
  t.dot[slot(DType::IQ1_S)] = dot_iq1_s;
  t.dot[slot(DType::IQ1_M)] = dot_iq1_m;
}

}  // namespace
}  // namespace colibri
