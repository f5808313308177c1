// Reference weight quantizers: ggml's quantize_row_q4_0_ref, _q4_1_ref,
// _q5_0_ref, _q5_1_ref and _mxfp4_ref (q8_0 shares the activation quantizer),
// and its Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL and IQ4_XS quantizers without an importance
// matrix (what llama-quantize writes when given none), for writing model files
// and for tests.
#include <cfloat>
#include <cmath>
#include <cstring>

#include "tensor/half.h"
#include "tensor/kernels/ref/ref.h"
#include "tensor/quant_blocks.h"

namespace colibri::ref {

namespace {

// The element of largest magnitude (the first, on ties), with its sign.
float signed_absmax(const float* x, int n) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < n; ++j)
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  return max;
}

void min_max(const float* x, int n, float* min, float* max) {
  *min = FLT_MAX;
  *max = -FLT_MAX;
  for (int j = 0; j < n; ++j) {
    if (x[j] < *min) *min = x[j];
    if (x[j] > *max) *max = x[j];
  }
}

int clamp_max(int v, int hi) { return v < hi ? v : hi; }

}  // namespace

// d = max / -8 so the largest magnitude lands exactly on q = 0.
void quantize_weights_q4_0(const float* src, void* dst, int64_t n) {
  auto* y = static_cast<block_q4_0*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i, src += kQK) {
    const float d = signed_absmax(src, kQK) / -8;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = float_to_half(d);
    for (int j = 0; j < kQK / 2; ++j) {
      const int q0 = clamp_max(static_cast<int8_t>(src[j] * id + 8.5f), 15);
      const int q1 = clamp_max(static_cast<int8_t>(src[j + kQK / 2] * id + 8.5f), 15);
      y[i].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

void quantize_weights_q4_1(const float* src, void* dst, int64_t n) {
  auto* y = static_cast<block_q4_1*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i, src += kQK) {
    float min, max;
    min_max(src, kQK, &min, &max);
    const float d = (max - min) / 15;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = float_to_half(d);
    y[i].m = float_to_half(min);
    for (int j = 0; j < kQK / 2; ++j) {
      const int q0 = clamp_max(static_cast<int8_t>((src[j] - min) * id + 0.5f), 15);
      const int q1 = clamp_max(static_cast<int8_t>((src[j + kQK / 2] - min) * id + 0.5f), 15);
      y[i].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

void quantize_weights_q5_0(const float* src, void* dst, int64_t n) {
  auto* y = static_cast<block_q5_0*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i, src += kQK) {
    const float d = signed_absmax(src, kQK) / -16;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = float_to_half(d);
    uint32_t qh = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      const int q0 = clamp_max(static_cast<int8_t>(src[j] * id + 16.5f), 31);
      const int q1 = clamp_max(static_cast<int8_t>(src[j + kQK / 2] * id + 16.5f), 31);
      y[i].qs[j] = static_cast<uint8_t>((q0 & 0xF) | ((q1 & 0xF) << 4));
      qh |= static_cast<uint32_t>((q0 & 0x10) >> 4) << j;
      qh |= static_cast<uint32_t>((q1 & 0x10) >> 4) << (j + kQK / 2);
    }
    std::memcpy(y[i].qh, &qh, 4);
  }
}

void quantize_weights_q5_1(const float* src, void* dst, int64_t n) {
  auto* y = static_cast<block_q5_1*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i, src += kQK) {
    float min, max;
    min_max(src, kQK, &min, &max);
    const float d = (max - min) / 31;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = float_to_half(d);
    y[i].m = float_to_half(min);
    uint32_t qh = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      const int q0 = static_cast<uint8_t>((src[j] - min) * id + 0.5f);
      const int q1 = static_cast<uint8_t>((src[j + kQK / 2] - min) * id + 0.5f);
      y[i].qs[j] = static_cast<uint8_t>((q0 & 0xF) | ((q1 & 0xF) << 4));
      qh |= static_cast<uint32_t>((q0 & 0x10) >> 4) << j;
      qh |= static_cast<uint32_t>((q1 & 0x10) >> 4) << (j + kQK / 2);
    }
    std::memcpy(y[i].qh, &qh, 4);
  }
}

// e = floor(log2(amax)) - 2 + 127, so amax / 2^(e - 127) lies in [4, 8) and
// the largest value lands on a code near 6 (E2M1's top) times the E8M0 scale;
// each value then takes the nearest code (the first in table order on ties,
// so 0 never becomes code 8, "-0"). log2f as ggml computes it, so a value just
// below a power of two gets the exponent ggml gives it. Where ggml's cast to
// uint8_t would be undefined (amax below 2^-125 or infinite), e is clamped to
// 0..255; NaNs never win amax (every comparison with them is false) and take
// code 0.
void quantize_weights_mxfp4(const float* src, void* dst, int64_t n) {
  auto* y = static_cast<block_mxfp4*>(dst);
  auto nearest = [](float v, float d) {
    int best = 0;
    float best_err = std::fabs(kMxfp4Values[0] * d - v);
    for (int i = 1; i < 16; ++i) {
      const float err = std::fabs(kMxfp4Values[i] * d - v);
      if (err < best_err) {
        best = i;
        best_err = err;
      }
    }
    return best;
  };
  for (int64_t i = 0; i < n / kQK; ++i, src += kQK) {
    float amax = 0.0f;
    for (int j = 0; j < kQK; ++j)
      if (amax < std::fabs(src[j])) amax = std::fabs(src[j]);
    int e = 0;
    if (amax > 0.0f) {
      const float l = std::floor(std::log2(amax)) - 2 + 127;
      e = l <= 0.0f ? 0 : l >= 255.0f ? 255 : static_cast<int>(l);
    }
    y[i].e = static_cast<uint8_t>(e);
    const float d = e8m0_to_float_half(y[i].e);
    for (int j = 0; j < kQK / 2; ++j)
      y[i].qs[j] = static_cast<uint8_t>(nearest(src[j], d) | (nearest(src[j + kQK / 2], d) << 4));
  }
}

namespace {

// kAbove[j]: the first code whose value exceeds j - 127 (the values are
// integers, so the first above any v in [j - 127, j - 126)).
constexpr auto kAbove = [] {
  struct {
    uint8_t v[241];
  } t{};
  for (int j = 0; j < 241; ++j) {
    int hi = 1;
    while (hi < 15 && kIq4nlValues[hi] <= j - 127) ++hi;
    t.v[j] = static_cast<uint8_t>(hi);
  }
  return t;
}();

// The IQ4 code whose value is nearest v (values in units of the scale); of two
// equally near, the larger.
int nearest_iq4(float v) {
  if (!(v > kIq4nlValues[0])) return 0;  // NaN too
  if (v >= kIq4nlValues[15]) return 15;
  int f = static_cast<int>(v);  // floor(v), exactly: -127 < v < 113
  f -= static_cast<float>(f) > v;
  const int hi = kAbove.v[f + 127];
  return v - kIq4nlValues[hi - 1] < kIq4nlValues[hi] - v ? hi - 1 : hi;
}

// sum w q x and sum w q^2 over a block coded at inverse scale id, the weights
// w = x^2 (each value's importance, lacking an importance matrix).
void iq4_fit(const float* x, float id, float* sumqx, float* sumq2) {
  float qx = 0.0f, q2 = 0.0f;
  for (int j = 0; j < kQK; ++j) {
    const float q = kIq4nlValues[nearest_iq4(id * x[j])], w = x[j] * x[j];
    qx += w * q * x[j];
    q2 += w * q * q;
  }
  *sumqx = qx;
  *sumq2 = q2;
}

// The scale of one block of 32: the least-squares scale of the codes found at
// 15 trial scales around max / -127 (the largest magnitude on the grid's
// longest arm), the one of least weighted error kept; 0 for a block of zeros.
float iq4_block_scale(const float* x) {
  const float max = signed_absmax(x, kQK);
  if (std::fabs(max) < 1e-15f) return 0.0f;
  float sumqx, sumq2;
  iq4_fit(x, 1.0f / (max / -kIq4nlValues[0]), &sumqx, &sumq2);
  float d = sumqx / sumq2, best = d * sumqx;
  for (int t = -7; t <= 7; ++t) {
    iq4_fit(x, static_cast<float>(t + kIq4nlValues[0]) / max, &sumqx, &sumq2);
    if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
      d = sumqx / sumq2;
      best = d * sumqx;
    }
  }
  return d;
}

void pack_iq4_codes(const float* x, float id, uint8_t* qs) {
  for (int j = 0; j < kQK / 2; ++j)
    qs[j] = static_cast<uint8_t>(nearest_iq4(id * x[j]) | (nearest_iq4(id * x[j + kQK / 2]) << 4));
}

}  // namespace

void quantize_weights_iq4_nl(const float* src, void* dst, int64_t n) {
  auto* y = static_cast<block_iq4_nl*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i, src += kQK) {
    const float d = iq4_block_scale(src);
    y[i].d = float_to_half(d);
    pack_iq4_codes(src, d != 0.0f ? 1.0f / d : 0.0f, y[i].qs);
  }
}

// Each sub-block's scale as for IQ4_NL; the super-block scale d = -m / 32 for
// the sub-block scale m of largest magnitude, so m codes as -32 and the others
// round to d (ls - 32), ls in 0..63; the codes are then found again at the
// scale each sub-block kept.
void quantize_weights_iq4_xs(const float* src, void* dst, int64_t n) {
  auto* y = static_cast<block_iq4_xs*>(dst);
  constexpr int kSub = kQK_K / kQK;
  for (int64_t i = 0; i < n / kQK_K; ++i, src += kQK_K) {
    float scales[kSub], m = 0.0f;
    for (int ib = 0; ib < kSub; ++ib) {
      scales[ib] = iq4_block_scale(src + ib * kQK);
      if (std::fabs(scales[ib]) > std::fabs(m)) m = scales[ib];
    }
    const float d = -m / 32;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = float_to_half(d);
    for (int ib = 0; ib < kSub; ++ib) {
      int l = nearest_int(id * scales[ib]);
      l = l < -32 ? -32 : l > 31 ? 31 : l;
      const float dl = d * static_cast<float>(l);
      pack_iq4_codes(src + ib * kQK, dl != 0.0f ? 1.0f / dl : 0.0f, y[i].qs + ib * kQK / 2);
      iq4_xs_set_scale(y[i], ib, l);
    }
  }
}

namespace {

// A sub-block of n (32: q4_K, q5_K; 16: q2_K) as d l - m, l in 0..nmax: the
// scale and min of least weighted error (squared, or absolute with mad) among
// nstep + 1 trial scales (rmin + rdelta i + nmax) / (max - min) around the
// min-max one, each refitted by least squares (the min clamped to at most 0);
// the codes go to L, -min to *the_min.
float fit_scale_min(int n, int nmax, const float* x, const float* w, uint8_t* L, float* the_min,
                    float rmin, float rdelta, int nstep, bool mad = false) {
  float min = x[0], max = x[0], sum_w = w[0], sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    std::memset(L, 0, n);
    *the_min = -min;
    return 0.0f;
  }
  auto code = [&](float iscale, float v) {
    const int l = nearest_int(iscale * (v - min));
    return l < 0 ? 0 : l > nmax ? nmax : l;
  };
  auto error = [mad](float diff) { return mad ? std::fabs(diff) : diff * diff; };
  float iscale = nmax / (max - min), scale = 1 / iscale, best = 0;
  for (int i = 0; i < n; ++i) {
    L[i] = static_cast<uint8_t>(code(iscale, x[i]));
    best += w[i] * error(scale * L[i] + min - x[i]);
  }
  uint8_t Laux[32];
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * is + nmax) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      const int l = code(iscale, x[i]);
      Laux[i] = static_cast<uint8_t>(l);
      sum_l += w[i] * l;
      sum_l2 += w[i] * l * l;
      sum_xl += w[i] * l * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D <= 0) continue;
    float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
    float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
    if (this_min > 0) {
      this_min = 0;
      this_scale = sum_xl / sum_l2;
    }
    float err = 0;
    for (int i = 0; i < n; ++i) err += w[i] * error(this_scale * Laux[i] + this_min - x[i]);
    if (err < best) {
      std::memcpy(L, Laux, n);
      best = err;
      scale = this_scale;
      min = this_min;
    }
  }
  *the_min = -min;
  return scale;
}

// The q4_K / q5_K super-block: each sub-block fitted with weights rms(x) +
// |x|, scales and mins as 6-bit multiples of d = max scale / 63 and dmin =
// max min / 63, then every code found again at the stored scale and min.
// Returns the codes (0..nmax) in L.
void quantize_k4_block(const float* x, int nmax, float rmin, int nstep, uint16_t* d_out,
                       uint16_t* dmin_out, uint8_t* scales, uint8_t* L) {
  float sc[8], mn[8], w[32], max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; ++j) {
    const float* xb = x + 32 * j;
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += xb[l] * xb[l];
    const float av_x = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) w[l] = av_x + std::fabs(xb[l]);
    sc[j] = fit_scale_min(32, nmax, xb, w, L + 32 * j, &mn[j], rmin, 0.1f, nstep);
    if (sc[j] > max_scale) max_scale = sc[j];
    if (mn[j] > max_min) max_min = mn[j];
  }
  const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  uint8_t ls[8], lm[8];
  for (int j = 0; j < 8; ++j) {
    ls[j] = static_cast<uint8_t>(clamp_max(static_cast<uint8_t>(nearest_int(inv_scale * sc[j])), 63));
    lm[j] = static_cast<uint8_t>(clamp_max(static_cast<uint8_t>(nearest_int(inv_min * mn[j])), 63));
  }
  k4_pack_scale_min(ls, lm, scales);
  *d_out = float_to_half(max_scale / 63.f);
  *dmin_out = float_to_half(max_min / 63.f);
  for (int j = 0; j < 8; ++j) {
    const float d = half_to_float(*d_out) * ls[j];
    if (!d) continue;
    const float dm = half_to_float(*dmin_out) * lm[j];
    for (int i = 0; i < 32; ++i) {
      const int l = nearest_int((x[32 * j + i] + dm) / d);
      L[32 * j + i] = static_cast<uint8_t>(l < 0 ? 0 : l > nmax ? nmax : l);
    }
  }
}

// A sub-block of 16 as d (l - 32), l in 0..63, weights x^2 (q6_K): the scale
// of least weighted squared error among the max-magnitude one and 18 trial
// scales -(32 + 0.1 i) / max around it; the codes go to L (0..63).
float fit_scale_q6(const float* x, int8_t* L) {
  constexpr int n = 16, nmax = 32;
  const float max = signed_absmax(x, n);
  if (std::fabs(max) < 1e-15f) {
    std::memset(L, 0, n);
    return 0.0f;
  }
  auto code = [](float iscale, float v) {
    const int l = nearest_int(iscale * v);
    return l < -nmax ? -nmax : l > nmax - 1 ? nmax - 1 : l;
  };
  float iscale = -nmax / max, sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = code(iscale, x[i]);
    L[i] = static_cast<int8_t>(l + nmax);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * l;
    suml2 += w * l * l;
  }
  float scale = suml2 ? sumlx / suml2 : 0.0f, best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(nmax + 0.1f * is) / max;
    sumlx = suml2 = 0;
    for (int i = 0; i < n; ++i) {
      const int l = code(iscale, x[i]);
      const float w = x[i] * x[i];
      sumlx += w * x[i] * l;
      suml2 += w * l * l;
    }
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(nmax + code(iscale, x[i]));
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

// A sub-block of 16 as d l, l in -4..3, weights x^2 (q3_K): codes at the
// max-magnitude scale -4 / max, then up to five passes that move single codes
// to where the least-squares scale of the rest puts them, kept where the fit
// improves; the codes go to L (0..7), the least-squares scale is returned.
float fit_scale_q3(const float* x, int8_t* L) {
  constexpr int n = 16, nmax = 4;
  const float max = signed_absmax(x, n);
  if (std::fabs(max) < 1e-15f) {
    std::memset(L, 0, n);
    return 0.0f;
  }
  auto clamp = [](int l) { return l < -nmax ? -nmax : l > nmax - 1 ? nmax - 1 : l; };
  const float iscale = -nmax / max;
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = clamp(nearest_int(iscale * x[i]));
    L[i] = static_cast<int8_t>(l);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * l;
    suml2 += w * l * l;
  }
  for (int pass = 0; pass < 5; ++pass) {
    int changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = x[i] * x[i];
      float slx = sumlx - w * x[i] * L[i];
      if (!(slx > 0)) continue;
      float sl2 = suml2 - w * L[i] * L[i];
      const int l = clamp(nearest_int(x[i] * sl2 / slx));
      if (l == L[i]) continue;
      slx += w * x[i] * l;
      sl2 += w * l * l;
      if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
        L[i] = static_cast<int8_t>(l);
        sumlx = slx;
        suml2 = sl2;
        ++changed;
      }
    }
    if (!changed) break;
  }
  for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(L[i] + nmax);
  return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

// Four 2-bit codes a byte: byte l of each 32-byte half holds elements l, l +
// 32, l + 64, l + 96 of its 128 (q2_K, q3_K).
template <typename Code>
void pack_2bit(const Code* L, uint8_t* qs) {
  for (int j = 0; j < kQK_K; j += 128)
    for (int l = 0; l < 32; ++l)
      qs[j / 4 + l] = static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) |
                                           (L[j + l + 96] << 6));
}

}  // namespace

// Sixteen sub-blocks of 16 fitted with weights |x| and absolute error, their
// scales and mins as 4-bit multiples of d = max scale / 15 and dmin = max
// min / 15, every code then found again at the stored scale and min.
void quantize_weights_q2_K(const float* src, void* dst, int64_t n) {
  auto* y = static_cast<block_q2_K*>(dst);
  uint8_t L[kQK_K];
  float w[16], sc[16], mn[16];
  for (int64_t i = 0; i < n / kQK_K; ++i, src += kQK_K) {
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < 16; ++j) {
      for (int l = 0; l < 16; ++l) w[l] = std::fabs(src[16 * j + l]);
      sc[j] = fit_scale_min(16, 3, src + 16 * j, w, L + 16 * j, &mn[j], -0.5f, 0.1f, 15, true);
      if (sc[j] > max_scale) max_scale = sc[j];
      if (mn[j] > max_min) max_min = mn[j];
    }
    if (max_scale > 0) {
      const float iscale = 15.f / max_scale;
      for (int j = 0; j < 16; ++j)
        y[i].scales[j] = static_cast<uint8_t>(nearest_int(iscale * sc[j]));
      y[i].d = float_to_half(max_scale / 15.f);
    } else {
      std::memset(y[i].scales, 0, sizeof y[i].scales);
      y[i].d = float_to_half(0.f);
    }
    if (max_min > 0) {
      const float iscale = 15.f / max_min;
      for (int j = 0; j < 16; ++j)
        y[i].scales[j] = static_cast<uint8_t>(y[i].scales[j] | (nearest_int(iscale * mn[j]) << 4));
      y[i].dmin = float_to_half(max_min / 15.f);
    } else {
      y[i].dmin = float_to_half(0.f);
    }
    for (int j = 0; j < 16; ++j) {
      const float d = half_to_float(y[i].d) * (y[i].scales[j] & 0xF);
      if (!d) continue;
      const float dm = half_to_float(y[i].dmin) * (y[i].scales[j] >> 4);
      for (int k = 0; k < 16; ++k) {
        const int l = nearest_int((src[16 * j + k] + dm) / d);
        L[16 * j + k] = static_cast<uint8_t>(l < 0 ? 0 : l > 3 ? 3 : l);
      }
    }
    pack_2bit(L, y[i].qs);
  }
}

// Sixteen sub-blocks of 16 fitted alone (fit_scale_q3), their scales as
// 6-bit multiples of d = max / -32 (the scale of largest magnitude codes as
// -32), every code then found again at the stored scale; its third bit goes
// to hmask (element j: bit j / 32 of byte j % 32).
void quantize_weights_q3_K(const float* src, void* dst, int64_t n) {
  auto* y = static_cast<block_q3_K*>(dst);
  int8_t L[kQK_K], ls[16];
  float scales[16];
  for (int64_t i = 0; i < n / kQK_K; ++i, src += kQK_K) {
    float max_scale = 0, amax = 0;
    for (int j = 0; j < 16; ++j) {
      scales[j] = fit_scale_q3(src + 16 * j, L + 16 * j);
      if (std::fabs(scales[j]) > amax) {
        amax = std::fabs(scales[j]);
        max_scale = scales[j];
      }
    }
    if (max_scale != 0) {
      const float iscale = -32.f / max_scale;
      for (int j = 0; j < 16; ++j) {
        const int l = static_cast<int8_t>(nearest_int(iscale * scales[j]));
        ls[j] = static_cast<int8_t>(l < -32 ? -32 : l > 31 ? 31 : l);
      }
      q3k_pack_scales(ls, y[i].scales);
      y[i].d = float_to_half(1 / iscale);
    } else {
      std::memset(y[i].scales, 0, sizeof y[i].scales);
      y[i].d = float_to_half(0.f);
    }
    q3k_scales(y[i].scales, ls);
    for (int j = 0; j < 16; ++j) {
      const float d = half_to_float(y[i].d) * ls[j];
      if (!d) continue;
      for (int k = 0; k < 16; ++k) {
        const int l = nearest_int(src[16 * j + k] / d);
        L[16 * j + k] = static_cast<int8_t>((l < -4 ? -4 : l > 3 ? 3 : l) + 4);
      }
    }
    std::memset(y[i].hmask, 0, sizeof y[i].hmask);
    for (int j = 0; j < kQK_K; ++j)
      if (L[j] > 3) {
        y[i].hmask[j % 32] = static_cast<uint8_t>(y[i].hmask[j % 32] | (1 << (j / 32)));
        L[j] = static_cast<int8_t>(L[j] - 4);
      }
    pack_2bit(L, y[i].qs);
  }
}

void quantize_weights_q4_K(const float* src, void* dst, int64_t n) {
  auto* y = static_cast<block_q4_K*>(dst);
  uint8_t L[kQK_K];
  for (int64_t i = 0; i < n / kQK_K; ++i, src += kQK_K) {
    quantize_k4_block(src, 15, -1.0f, 20, &y[i].d, &y[i].dmin, y[i].scales, L);
    for (int j = 0; j < kQK_K; j += 64)
      for (int l = 0; l < 32; ++l)
        y[i].qs[j / 2 + l] = static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 4));
  }
}

// As q4_K with 5-bit codes: the fifth bit of element 64 c + j (j < 32) is bit
// 2 c of qh[j], of element 64 c + 32 + j bit 2 c + 1.
void quantize_weights_q5_K(const float* src, void* dst, int64_t n) {
  auto* y = static_cast<block_q5_K*>(dst);
  uint8_t L[kQK_K];
  for (int64_t i = 0; i < n / kQK_K; ++i, src += kQK_K) {
    quantize_k4_block(src, 31, -0.5f, 15, &y[i].d, &y[i].dmin, y[i].scales, L);
    std::memset(y[i].qh, 0, sizeof y[i].qh);
    for (int c = 0; c < kQK_K / 64; ++c)
      for (int j = 0; j < 32; ++j) {
        const int l1 = L[64 * c + j], l2 = L[64 * c + 32 + j];
        y[i].qh[j] |= static_cast<uint8_t>(((l1 >> 4) << (2 * c)) | ((l2 >> 4) << (2 * c + 1)));
        y[i].qs[32 * c + j] = static_cast<uint8_t>((l1 & 0xF) | ((l2 & 0xF) << 4));
      }
  }
}

// Sixteen sub-blocks of 16 fitted alone, their scales as int8 multiples of d
// = max / -128 (the scale of largest magnitude codes as -128, clamped to
// 127), every code then found again at the stored scale.
void quantize_weights_q6_K(const float* src, void* dst, int64_t n) {
  auto* y = static_cast<block_q6_K*>(dst);
  int8_t L[kQK_K];
  float scales[kQK_K / 16];
  for (int64_t i = 0; i < n / kQK_K; ++i, src += kQK_K) {
    float max_scale = 0, max_abs = 0;
    for (int ib = 0; ib < kQK_K / 16; ++ib) {
      scales[ib] = fit_scale_q6(src + 16 * ib, L + 16 * ib);
      if (std::fabs(scales[ib]) > max_abs) {
        max_abs = std::fabs(scales[ib]);
        max_scale = scales[ib];
      }
    }
    if (max_abs < 1e-15f) {
      std::memset(&y[i], 0, sizeof y[i]);
      continue;
    }
    const float iscale = -128.f / max_scale;
    y[i].d = float_to_half(1 / iscale);
    for (int ib = 0; ib < kQK_K / 16; ++ib)
      y[i].scales[ib] = static_cast<int8_t>(clamp_max(nearest_int(iscale * scales[ib]), 127));
    for (int j = 0; j < kQK_K / 16; ++j) {
      const float d = half_to_float(y[i].d) * y[i].scales[j];
      if (!d) continue;
      for (int k = 0; k < 16; ++k) {
        const int l = nearest_int(src[16 * j + k] / d);
        L[16 * j + k] = static_cast<int8_t>((l < -32 ? -32 : l > 31 ? 31 : l) + 32);
      }
    }
    for (int j = 0; j < kQK_K; j += 128) {
      uint8_t* ql = y[i].ql + j / 2;
      uint8_t* qh = y[i].qh + j / 4;
      for (int l = 0; l < 32; ++l) {
        const int q1 = L[j + l], q2 = L[j + l + 32], q3 = L[j + l + 64], q4 = L[j + l + 96];
        ql[l] = static_cast<uint8_t>((q1 & 0xF) | ((q3 & 0xF) << 4));
        ql[l + 32] = static_cast<uint8_t>((q2 & 0xF) | ((q4 & 0xF) << 4));
        qh[l] = static_cast<uint8_t>((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6));
      }
    }
  }
}

}  // namespace colibri::ref
