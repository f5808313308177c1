// ARMv8.6 i8mm tiles for prompts (Cortex-A510/A710/X2 and up, Neoverse V1/N2,
// Apple M2): smmla multiplies a 2 x 8 block of weights by an 8 x 2 block of
// activations into 2 x 2 int32 sums, so two rows and two tokens share every
// load where the dot does one pair. Compiled with +dotprod+i8mm and called
// only where the kernel reports both (dispatch.cpp: HWCAP2_I8MM).
//
// The dots stay those of the dotprod level; a tile gives every (row, token)
// exactly that dot's value: the integer sums are exact either way, and the
// float steps (four blocks per lane vector, one fma each, the same lane sum
// at the end) are the dot's (neon_common.h, dot_q32).
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
template <typename W>
inline int32x4_t block_2x2(const typename W::Block& w0, const typename W::Block& w1,
                           const block_q8_0& x0, const block_q8_0& x1) {
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
// vector dot_q32 builds for that pair.
template <typename W>
void tile_2x2(const uint8_t* w, size_t w_stride, const uint8_t* x, size_t x_stride, int64_t nb,
              float* y, size_t y_stride) {
  using Block = typename W::Block;
  const Block* wr[2] = {reinterpret_cast<const Block*>(w),
                        reinterpret_cast<const Block*>(w + w_stride)};
  const block_q8_0* xt[2] = {reinterpret_cast<const block_q8_0*>(x),
                             reinterpret_cast<const block_q8_0*>(x + x_stride)};
  float32x4_t acc[2][2] = {{vdupq_n_f32(0), vdupq_n_f32(0)}, {vdupq_n_f32(0), vdupq_n_f32(0)}};
  for (int64_t b = 0; b < nb; b += 4) {
    int32x4_t m[4];
    typename W::Scale dw[2][4] = {};
    uint16_t dx[2][4] = {};
    for (int k = 0; k < 4; ++k) {
      if (b + k < nb) {
        m[k] = block_2x2<W>(wr[0][b + k], wr[1][b + k], xt[0][b + k], xt[1][b + k]);
        for (int i = 0; i < 2; ++i) {
          dw[i][k] = W::scale(wr[i][b + k]);
          dx[i][k] = xt[i][b + k].d;
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
  }
  for (int r = 0; r < 2; ++r)
    for (int t = 0; t < 2; ++t) y[t * y_stride + r] = vaddvq_f32(acc[r][t]);
}

// kernel_table.h's TileFn: 2 x 2 tiles, and the dot for an odd last row or
// token.
template <typename W>
void tile(const uint8_t* w, size_t w_stride, int64_t nr, const uint8_t* x, size_t x_stride,
          int64_t nt, int64_t n, float* y, size_t y_stride) {
  const int64_t nb = n / kQK;
  constexpr DotFn dot = dot_q32<W, block_q8_0>;
  int64_t r = 0;
  for (; r + 2 <= nr; r += 2) {
    int64_t t = 0;
    for (; t + 2 <= nt; t += 2)
      tile_2x2<W>(w + r * w_stride, w_stride, x + t * x_stride, x_stride, nb, y + t * y_stride + r,
                  y_stride);
    for (; t < nt; ++t)
      for (int64_t i = r; i < r + 2; ++i)
        y[t * y_stride + i] = dot(w + i * w_stride, x + t * x_stride, n);
  }
  for (; r < nr; ++r)
    for (int64_t t = 0; t < nt; ++t)
      y[t * y_stride + r] = dot(w + r * w_stride, x + t * x_stride, n);
}

}  // namespace

void add_neon_i8mm_kernels(KernelTable& t) {
  // This file's own copies of the dots, so the tiles and the dots they must
  // equal come from one compilation.
  t.dot[slot(DType::Q4_0)] = dot_q32<Q4_0W, block_q8_0>;
  t.dot[slot(DType::Q5_0)] = dot_q32<Q5_0W, block_q8_0>;
  t.dot[slot(DType::Q8_0)] = dot_q32<Q8_0W, block_q8_0>;
  t.dot[slot(DType::MXFP4)] = dot_q32<Mxfp4W, block_q8_0>;
  t.dot[slot(DType::IQ4_NL)] = dot_q32<Iq4NlW, block_q8_0>;
  t.tile[slot(DType::Q4_0)] = tile<Q4_0W>;
  t.tile[slot(DType::Q5_0)] = tile<Q5_0W>;
  t.tile[slot(DType::Q8_0)] = tile<Q8_0W>;
  t.tile[slot(DType::MXFP4)] = tile<Mxfp4W>;
  t.tile[slot(DType::IQ4_NL)] = tile<Iq4NlW>;
}

}  // namespace colibri
