// The F16 and BF16 dots' one shape, whatever multiplies their elements: the
// plain level widens to fp32 and uses fma (neon.cpp), FEAT_FHM's fmlal and
// FEAT_BF16's bfmlalb / bfmlalt widen inside the multiply (neon_fhm.cpp,
// neon_bf16.cpp). Each product of two 16-bit floats is exact in fp32 and
// each instruction adds it with one rounding, so when every implementation
// puts the same elements into the same lanes in the same order, they give
// the same bits. Internal linkage, as neon_common.h: each level's copy stays
// in its own object.
#pragma once

#include <arm_neon.h>

#include <cmath>
#include <cstdint>

namespace colibri {
namespace {

// sum_i w[i] x[i] over n 16-bit floats: 16 elements a step into four fp32
// accumulators, then 8, then a scalar tail after the lanes are summed.
// Step::mac8(a, b, w, x) adds the products of the eight elements of w and x
// into two accumulators, lane j of each always the same element: for F16 a
// takes elements 0..3 and b 4..7 (fmlal, fmlal2), for BF16 a the even
// elements and b the odd (bfmlalb, bfmlalt). Step::to_float widens one
// element exactly.
template <typename Step>
float dot_widening(const void* wv, const void* xv, int64_t n) {
  const auto* w = static_cast<const uint16_t*>(wv);
  const auto* x = static_cast<const uint16_t*>(xv);
  float32x4_t acc[4] = {vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0)};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const uint16x8x2_t a = vld1q_u16_x2(w + i), b = vld1q_u16_x2(x + i);
    Step::mac8(acc[0], acc[1], a.val[0], b.val[0]);
    Step::mac8(acc[2], acc[3], a.val[1], b.val[1]);
  }
  if (i + 8 <= n) {
    Step::mac8(acc[0], acc[1], vld1q_u16(w + i), vld1q_u16(x + i));
    i += 8;
  }
  float s = vaddvq_f32(vaddq_f32(vaddq_f32(acc[0], acc[1]), vaddq_f32(acc[2], acc[3])));
  for (; i < n; ++i) s = std::fma(Step::to_float(w[i]), Step::to_float(x[i]), s);
  return s;
}

}  // namespace
}  // namespace colibri
