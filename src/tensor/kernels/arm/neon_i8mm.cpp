// ARMv8.6 i8mm tiles for prompts (Cortex-A510/A710/X2 and up, Neoverse V1/N2,
// Apple M2): smmla multiplies a 2 x 8 block of weights by an 8 x 2 block of
// activations into 2 x 2 int32 sums, so two rows and two tokens share every
// load where the dot does one pair. Compiled with +dotprod+i8mm and called
// only where the kernel reports both (dispatch.cpp: HWCAP2_I8MM).
//
// The dots stay those of the dotprod level; a tile gives every (row, token)
// exactly that dot's value: the integer sums are exact either way, and the
// float steps (four blocks per lane vector, one fma each, the same lane sum
// at the end) are the dot's (neon_common.h, dot_q32). The super-block types
// (K-quants, i-quants) decode two rows once for up to 8 tokens, their
// decoding being most of their dots' work, and repeat each dot's float
// expression per (row, token).
#define CLB_ARM_DOTPROD 1
#include <type_traits>

#include "tensor/kernels/arm/neon_common.h"

namespace colibri {
namespace {

// The 64-bit halves of two rows' 16-byte vectors interleaved: smmla's 2 x 8
// operand for elements 0..7 (lo) and 8..15 (hi) of each.
inline int8x16_t rows_lo(int8x16_t a, int8x16_t b) {
  return vreinterpretq_s8_s64(vzip1q_s64(vreinterpretq_s64_s8(a), vreinterpretq_s64_s8(b)));
}
inline int8x16_t rows_hi(int8x16_t a, int8x16_t b) {
  return vreinterpretq_s8_s64(vzip2q_s64(vreinterpretq_s64_s8(a), vreinterpretq_s64_s8(b)));
}

// One block of rows r0, r1 against tokens t0, t1: [r0t0, r0t1, r1t0, r1t1].
template <typename W, typename X>
inline int32x4_t block_2x2(const typename W::Block& w0, const typename W::Block& w1, const X& x0,
                           const X& x1) {
  int8x16_t a0, a1, b0, b1;
  W::unpack(w0, a0, a1);
  W::unpack(w1, b0, b1);
  const int8x16_t x0l = vld1q_s8(x0.qs), x0h = vld1q_s8(x0.qs + 16);
  const int8x16_t x1l = vld1q_s8(x1.qs), x1h = vld1q_s8(x1.qs + 16);
  int32x4_t m = vmmlaq_s32(vdupq_n_s32(0), rows_lo(a0, b0), rows_lo(x0l, x1l));
  m = vmmlaq_s32(m, rows_hi(a0, b0), rows_hi(x0l, x1l));
  m = vmmlaq_s32(m, rows_lo(a1, b1), rows_lo(x0h, x1h));
  return vmmlaq_s32(m, rows_hi(a1, b1), rows_hi(x0h, x1h));
}

// Two rows x two tokens over all blocks. Four blocks' 2 x 2 results are
// transposed into per-(row, token) vectors of the four blocks' sums: the
// vector dot_q32 builds for that pair. Against q8_1 activations (q4_1,
// q5_1) the min's term follows, as in the dot.
template <typename W, typename X>
void tile_2x2(const uint8_t* w, size_t w_stride, const uint8_t* x, size_t x_stride, int64_t nb,
              float* y, size_t y_stride) {
  using Block = typename W::Block;
  const Block* wr[2] = {reinterpret_cast<const Block*>(w),
                        reinterpret_cast<const Block*>(w + w_stride)};
  constexpr bool kMin = sizeof(X) == sizeof(block_q8_1);
  const X* xt[2] = {reinterpret_cast<const X*>(x), reinterpret_cast<const X*>(x + x_stride)};
  float32x4_t acc[2][2] = {{vdupq_n_f32(0), vdupq_n_f32(0)}, {vdupq_n_f32(0), vdupq_n_f32(0)}};
  for (int64_t b = 0; b < nb; b += 4) {
    int32x4_t m[4];
    typename W::Scale dw[2][4] = {};
    uint16_t dx[2][4] = {}, mw[2][4] = {}, sx[2][4] = {};
    for (int k = 0; k < 4; ++k) {
      if (b + k < nb) {
        m[k] = block_2x2<W>(wr[0][b + k], wr[1][b + k], xt[0][b + k], xt[1][b + k]);
        for (int i = 0; i < 2; ++i) {
          dw[i][k] = W::scale(wr[i][b + k]);
          dx[i][k] = xt[i][b + k].d;
          if constexpr (kMin) {
            mw[i][k] = wr[i][b + k].m;
            sx[i][k] = xt[i][b + k].s;
          }
        }
      } else {
        m[k] = vdupq_n_s32(0);
      }
    }
    const int32x4_t t01 = vtrn1q_s32(m[0], m[1]), u01 = vtrn2q_s32(m[0], m[1]);
    const int32x4_t t23 = vtrn1q_s32(m[2], m[3]), u23 = vtrn2q_s32(m[2], m[3]);
    auto zip = [](int32x4_t a, int32x4_t c, bool second) {
      const int64x2_t a64 = vreinterpretq_s64_s32(a), c64 = vreinterpretq_s64_s32(c);
      return vreinterpretq_s32_s64(second ? vzip2q_s64(a64, c64) : vzip1q_s64(a64, c64));
    };
    const int32x4_t s[2][2] = {{zip(t01, t23, false), zip(u01, u23, false)},
                               {zip(t01, t23, true), zip(u01, u23, true)}};
    float32x4_t fw[2], fx[2];
    for (int i = 0; i < 2; ++i) {
      fw[i] = W::scales4(dw[i]);
      fx[i] = h2f4(dx[i][0], dx[i][1], dx[i][2], dx[i][3]);
    }
    for (int r = 0; r < 2; ++r)
      for (int t = 0; t < 2; ++t)
        acc[r][t] = vfmaq_f32(acc[r][t], vcvtq_f32_s32(s[r][t]), vmulq_f32(fw[r], fx[t]));
    if constexpr (kMin) {
      const float32x4_t fm[2] = {h2f4(mw[0][0], mw[0][1], mw[0][2], mw[0][3]),
                                 h2f4(mw[1][0], mw[1][1], mw[1][2], mw[1][3])};
      const float32x4_t fs[2] = {h2f4(sx[0][0], sx[0][1], sx[0][2], sx[0][3]),
                                 h2f4(sx[1][0], sx[1][1], sx[1][2], sx[1][3])};
      for (int r = 0; r < 2; ++r)
        for (int t = 0; t < 2; ++t) acc[r][t] = vfmaq_f32(acc[r][t], fm[r], fs[t]);
    }
  }
  for (int r = 0; r < 2; ++r)
    for (int t = 0; t < 2; ++t) y[t * y_stride + r] = vaddvq_f32(acc[r][t]);
}

// kernel_table.h's TileFn: 2 x 2 tiles, and the dot for an odd last row or
// token.
template <typename W, typename X = block_q8_0>
void tile(const uint8_t* w, size_t w_stride, int64_t nr, const uint8_t* x, size_t x_stride,
          int64_t nt, int64_t n, float* y, size_t y_stride) {
  const int64_t nb = n / kQK;
  constexpr DotFn dot = dot_q32<W, X>;
  int64_t r = 0;
  for (; r + 2 <= nr; r += 2) {
    int64_t t = 0;
    for (; t + 2 <= nt; t += 2)
      tile_2x2<W, X>(w + r * w_stride, w_stride, x + t * x_stride, x_stride, nb,
                     y + t * y_stride + r, y_stride);
    for (; t < nt; ++t)
      for (int64_t i = r; i < r + 2; ++i)
        y[t * y_stride + i] = dot(w + i * w_stride, x + t * x_stride, n);
  }
  for (; r < nr; ++r)
    for (int64_t t = 0; t < nt; ++t)
      y[t * y_stride + r] = dot(w + r * w_stride, x + t * x_stride, n);
}

// ---- super-block types against q8_K: 2 rows x 2 tokens a step ----
//
// A decoder D gives sub-block ib (32 weights) of a 256-weight super-block as
// two 16-byte vectors of the integers its dot multiplies and the integer
// scale of each half (D::sub, after D::prepare has unpacked what the whole
// super-block shares), and the super-block's float term for the four (row,
// token) pairs from their exact integer sums (D::finish): the expression the
// dot in neon_common.h evaluates, lane by lane, so every (row, token) gets
// that dot's value to the bit. Types with a second integer sum (IQ1_M's
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

// q4_K / q5_K (dot_k4): sub-block ib is the low (even ib) or high nibbles of
// 32-byte chunk ib / 2, q5_K's bit ib of qh as 16; d sc isum - dmin m sum.
template <bool kFifth>
struct K4T {
  using Block = std::conditional_t<kFifth, block_q5_K, block_q4_K>;
  static constexpr bool kDelta = false;
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
struct Q6KT {
  using Block = block_q6_K;
  static constexpr bool kDelta = false;
  using Prep = NoPrep;
  static void prepare(const Block&, Prep&) {}
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
struct Q2KT {
  using Block = block_q2_K;
  static constexpr bool kDelta = false;
  using Prep = NoPrep;
  static void prepare(const Block&, Prep&) {}
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
struct Q3KT {
  using Block = block_q3_K;
  static constexpr bool kDelta = false;
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
  static float32x4_t finish(const Block& b0, const Block& b1, const Prep&, const Prep&,
                            const block_q8_K& y0, const block_q8_K& y1, int32x4_t isum) {
    return vmulq_f32(d_products(b0, b1, y0, y1), vcvtq_f32_s32(isum));
  }
};

// IQ4_XS (dot_iq4_xs): the codes through kIq4nlValues, scale ls - 32.
struct Iq4XsT {
  using Block = block_iq4_xs;
  static constexpr bool kDelta = false;
  using Prep = NoPrep;
  static void prepare(const Block&, Prep&) {}
  static void sub(const Block& b, const Prep&, int ib, int8x16_t w[2], int ls[2]) {
    table_nibbles(kIq4nlValues, b.qs + 16 * ib, w[0], w[1]);
    ls[0] = ls[1] = iq4_xs_scale(b, ib);
  }
  static float32x4_t finish(const Block& b0, const Block& b1, const Prep&, const Prep&,
                            const block_q8_K& y0, const block_q8_K& y1, int32x4_t isum) {
    return vmulq_f32(d_products(b0, b1, y0, y1), vcvtq_f32_s32(isum));
  }
};

// The codebook i-quants (dot_iq_grid): their sub-blocks as the dot takes them.
template <typename N>
struct IqGridT {
  using Block = typename N::Block;
  static constexpr bool kDelta = false;
  using Prep = NoPrep;
  static void prepare(const Block&, Prep&) {}
  static void sub(const Block& b, const Prep&, int ib, int8x16_t w[2], int ls[2]) {
    N::sub(b, ib, w, ls);
  }
  static float32x4_t finish(const Block& b0, const Block& b1, const Prep&, const Prep&,
                            const block_q8_K& y0, const block_q8_K& y1, int32x4_t isum) {
    return vmulq_f32(d_products(b0, b1, y0, y1), vcvtq_f32_s32(isum));
  }
  static float32x4_t last(float32x4_t sum) { return vmulq_f32(vdupq_n_f32(N::kScale), sum); }
};

// IQ1_S (dot_iq1_s): the points' -1, 0, 1; the shift's term (sign bit 15
// of qh) is +-ls times the sub-block's 32-sum of activations.
struct Iq1ST {
  using Block = block_iq1_s;
  static constexpr bool kDelta = false;
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
struct Iq1MT {
  using Block = block_iq1_m;
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

// Rows r0, r1 (their 16-byte halves interleaved: rows_lo, rows_hi) against
// 16 activations of tokens t0, t1: [r0t0, r0t1, r1t0, r1t1] added to m.
inline int32x4_t half_2x2(int32x4_t m, int8x16_t lo, int8x16_t hi, const int8_t* t0,
                          const int8_t* t1) {
  const int8x16_t x0 = vld1q_s8(t0), x1 = vld1q_s8(t1);
  return vmmlaq_s32(vmmlaq_s32(m, lo, rows_lo(x0, x1)), hi, rows_hi(x0, x1));
}

// Two rows against P pairs of tokens (tokens 2p, 2p + 1 at x + 2p x_stride
// and the next stride), y[t * y_stride + r] as the dot gives it. The rows'
// sub-blocks are decoded once for all P pairs. A sub-block whose two halves
// share a scale (ls[0] == ls[1]) takes one multiply for both.
template <typename D, int P>
void tile_sb_2xP(const uint8_t* w, size_t w_stride, const uint8_t* x, size_t x_stride, int64_t nsb,
                 float* y, size_t y_stride) {
  using Block = typename D::Block;
  const Block* w0 = reinterpret_cast<const Block*>(w);
  const Block* w1 = reinterpret_cast<const Block*>(w + w_stride);
  const block_q8_K* xt[2 * P];
  for (int t = 0; t < 2 * P; ++t) xt[t] = reinterpret_cast<const block_q8_K*>(x + t * x_stride);
  float32x4_t sum[P];
  for (int p = 0; p < P; ++p) sum[p] = vdupq_n_f32(0);
  for (int64_t i = 0; i < nsb; ++i) {
    typename D::Prep p0, p1;
    D::prepare(w0[i], p0);
    D::prepare(w1[i], p1);
    int32x4_t acc[P], dacc[P];
    for (int p = 0; p < P; ++p) acc[p] = dacc[p] = vdupq_n_s32(0);
    // The products of one kind (the weights, or IQ1_M's shifts) of
    // sub-block ib: a[h], b[h] rows 0 and 1 of half h, scales la, lb.
    auto add = [&](int32x4_t(&into)[P], const int8x16_t a[2], const int8x16_t b[2], const int la[2],
                   const int lb[2], int ib) {
      int8x16_t lo[2], hi[2];
      for (int h = 0; h < 2; ++h) {
        lo[h] = rows_lo(a[h], b[h]);
        hi[h] = rows_hi(a[h], b[h]);
      }
      const bool one = la[0] == la[1] && lb[0] == lb[1];
      const int32x4_t s0 = vcombine_s32(vdup_n_s32(la[0]), vdup_n_s32(lb[0]));
      const int32x4_t s1 = vcombine_s32(vdup_n_s32(la[1]), vdup_n_s32(lb[1]));
      for (int p = 0; p < P; ++p) {
        const int8_t* t0 = xt[2 * p][i].qs + kQK * ib;
        const int8_t* t1 = xt[2 * p + 1][i].qs + kQK * ib;
        const int32x4_t m0 = half_2x2(vdupq_n_s32(0), lo[0], hi[0], t0, t1);
        if (one) {
          into[p] = vmlaq_s32(into[p], half_2x2(m0, lo[1], hi[1], t0 + 16, t1 + 16), s0);
        } else {
          into[p] = vmlaq_s32(into[p], m0, s0);
          into[p] =
              vmlaq_s32(into[p], half_2x2(vdupq_n_s32(0), lo[1], hi[1], t0 + 16, t1 + 16), s1);
        }
      }
    };
    for (int ib = 0; ib < kQK_K / kQK; ++ib) {
      int8x16_t a[2], b[2];
      int la[2], lb[2];
      if constexpr (D::kDelta) {
        int8x16_t da[2], db[2];
        D::sub(w0[i], p0, ib, a, da, la);
        D::sub(w1[i], p1, ib, b, db, lb);
        add(dacc, da, db, la, lb, ib);
      } else {
        D::sub(w0[i], p0, ib, a, la);
        D::sub(w1[i], p1, ib, b, lb);
      }
      add(acc, a, b, la, lb, ib);
    }
    for (int p = 0; p < P; ++p) {
      const block_q8_K& y0 = xt[2 * p][i];
      const block_q8_K& y1 = xt[2 * p + 1][i];
      if constexpr (D::kDelta)
        sum[p] = vaddq_f32(sum[p], D::finish(p0, p1, y0, y1, acc[p], dacc[p]));
      else
        sum[p] = vaddq_f32(sum[p], D::finish(w0[i], w1[i], p0, p1, y0, y1, acc[p]));
    }
  }
  for (int p = 0; p < P; ++p) {
    if constexpr (HasLast<D>) sum[p] = D::last(sum[p]);
    float* yp = y + 2 * p * y_stride;
    yp[0] = vgetq_lane_f32(sum[p], 0);
    yp[y_stride] = vgetq_lane_f32(sum[p], 1);
    yp[1] = vgetq_lane_f32(sum[p], 2);
    yp[y_stride + 1] = vgetq_lane_f32(sum[p], 3);
  }
}

// kernel_table.h's TileFn over super-blocks: 2 x 4 tiles, then 2 x 2, and the type's dot
// for an odd last row or token.
template <typename D, DotFn kDot>
void tile_sb(const uint8_t* w, size_t w_stride, int64_t nr, const uint8_t* x, size_t x_stride,
             int64_t nt, int64_t n, float* y, size_t y_stride) {
  const int64_t nsb = n / kQK_K;
  int64_t r = 0;
  for (; r + 2 <= nr; r += 2) {
    int64_t t = 0;
    for (; t + 8 <= nt; t += 8)
      tile_sb_2xP<D, 4>(w + r * w_stride, w_stride, x + t * x_stride, x_stride, nsb,
                        y + t * y_stride + r, y_stride);
    for (; t + 4 <= nt; t += 4)
      tile_sb_2xP<D, 2>(w + r * w_stride, w_stride, x + t * x_stride, x_stride, nsb,
                        y + t * y_stride + r, y_stride);
    for (; t + 2 <= nt; t += 2)
      tile_sb_2xP<D, 1>(w + r * w_stride, w_stride, x + t * x_stride, x_stride, nsb,
                        y + t * y_stride + r, y_stride);
    for (; t < nt; ++t)
      for (int64_t i = r; i < r + 2; ++i)
        y[t * y_stride + i] = kDot(w + i * w_stride, x + t * x_stride, n);
  }
  for (; r < nr; ++r)
    for (int64_t t = 0; t < nt; ++t)
      y[t * y_stride + r] = kDot(w + r * w_stride, x + t * x_stride, n);
}

}  // namespace

void add_neon_i8mm_kernels(KernelTable& t) {
  // This file's own copies of the dots, so the tiles and the dots they must
  // equal come from one compilation.
  t.dot[slot(DType::Q4_0)] = dot_q32<Q4_0W, block_q8_0>;
  t.dot[slot(DType::Q5_0)] = dot_q32<Q5_0W, block_q8_0>;
  t.dot[slot(DType::Q8_0)] = dot_q32<Q8_0W, block_q8_0>;
  t.dot[slot(DType::MXFP4)] = dot_q32<Mxfp4W, block_q8_0>;
  t.dot[slot(DType::Q4_1)] = dot_q32<Q4_1W, block_q8_1>;
  t.dot[slot(DType::Q5_1)] = dot_q32<Q5_1W, block_q8_1>;
  t.dot[slot(DType::IQ4_NL)] = dot_q32<Iq4NlW, block_q8_0>;
  t.tile[slot(DType::Q4_0)] = tile<Q4_0W>;
  t.tile[slot(DType::Q5_0)] = tile<Q5_0W>;
  t.tile[slot(DType::Q8_0)] = tile<Q8_0W>;
  t.tile[slot(DType::MXFP4)] = tile<Mxfp4W>;
  t.tile[slot(DType::IQ4_NL)] = tile<Iq4NlW>;
  t.tile[slot(DType::Q4_1)] = tile<Q4_1W, block_q8_1>;
  t.tile[slot(DType::Q5_1)] = tile<Q5_1W, block_q8_1>;
  // The super-block types: the same, against q8_K.
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
  t.tile[slot(DType::Q2_K)] = tile_sb<Q2KT, dot_q2_K>;
  t.tile[slot(DType::Q3_K)] = tile_sb<Q3KT, dot_q3_K>;
  t.tile[slot(DType::Q4_K)] = tile_sb<K4T<false>, dot_q4_K>;
  t.tile[slot(DType::Q5_K)] = tile_sb<K4T<true>, dot_q5_K>;
  t.tile[slot(DType::Q6_K)] = tile_sb<Q6KT, dot_q6_K>;
  t.tile[slot(DType::IQ4_XS)] = tile_sb<Iq4XsT, dot_iq4_xs>;
  t.tile[slot(DType::IQ2_XXS)] = tile_sb<IqGridT<Iq2XxsN>, dot_iq_grid<Iq2XxsN>>;
  t.tile[slot(DType::IQ2_XS)] = tile_sb<IqGridT<Iq2XsN>, dot_iq_grid<Iq2XsN>>;
  t.tile[slot(DType::IQ2_S)] = tile_sb<IqGridT<Iq2SN>, dot_iq_grid<Iq2SN>>;
  t.tile[slot(DType::IQ3_XXS)] = tile_sb<IqGridT<Iq3XxsN>, dot_iq_grid<Iq3XxsN>>;
  t.tile[slot(DType::IQ3_S)] = tile_sb<IqGridT<Iq3SN>, dot_iq_grid<Iq3SN>>;
  t.tile[slot(DType::IQ1_S)] = tile_sb<Iq1ST, dot_iq1_s>;
  t.tile[slot(DType::IQ1_M)] = tile_sb<Iq1MT, dot_iq1_m>;
}

}  // namespace colibri
