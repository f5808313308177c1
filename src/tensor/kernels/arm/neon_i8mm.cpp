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
struct SmmlaStep {
  template <typename D, int P>
  static void run(const uint8_t* w, size_t w_stride, const uint8_t* x, size_t x_stride, int64_t nsb,
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
      auto add = [&](int32x4_t(&into)[P], const int8x16_t a[2], const int8x16_t b[2],
                     const int la[2], const int lb[2], int ib) {
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
    store_pairs<D, P>(sum, y, y_stride);
  }
};

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
  t.tile[slot(DType::Q8_0)] = tile<Q8_0W>;
  t.tile[slot(DType::MXFP4)] = tile<Mxfp4W>;
  t.tile[slot(DType::IQ4_NL)] = tile<Iq4NlW>;
  t.tile[slot(DType::Q4_1)] = tile<Q4_1W, block_q8_1>;
  // q5_0 and q5_1 unpack their fifth bits at some cost: a row once for 8
  // tokens on sdot takes fewer instructions than smmla's 2 x 2 (532 against 708
  // and 694 against 784 per 1000 MACs, tools/arm64-insns.sh 16).
  t.tile[slot(DType::Q5_0)] = tile_q32<Q5_0W, block_q8_0>;
  t.tile[slot(DType::Q5_1)] = tile_q32<Q5_1W, block_q8_1>;
  // The super-block types: the same, against q8_K.
  add_neon_sb_dots(t);
  add_neon_sb_tiles<SmmlaStep>(t);
}

}  // namespace colibri
