// Reference weight quantizers: ggml's quantize_row_q4_0_ref, _q4_1_ref,
// _q5_0_ref, _q5_1_ref and _mxfp4_ref (q8_0 shares the activation quantizer),
// and its IQ4_NL / IQ4_XS quantizers without an importance matrix (what
// llama-quantize writes when given none), for writing model files and for tests.
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

// The IQ4 code whose value is nearest v (values in units of the scale); of two
// equally near, the larger.
int nearest_iq4(float v) {
  if (v <= kIq4nlValues[0]) return 0;
  if (v >= kIq4nlValues[15]) return 15;
  int hi = 1;
  while (v >= kIq4nlValues[hi]) ++hi;
  return v - kIq4nlValues[hi - 1] < kIq4nlValues[hi] - v ? hi - 1 : hi;
}

// sum w q x and sum w q^2 over a block coded at inverse scale id, the weights
// w = x^2 (each value's importance, lacking an importance matrix); the codes go
// to L where it is given.
void iq4_fit(const float* x, float id, uint8_t* L, float* sumqx, float* sumq2) {
  float qx = 0.0f, q2 = 0.0f;
  for (int j = 0; j < kQK; ++j) {
    const int l = nearest_iq4(id * x[j]);
    if (L != nullptr) L[j] = static_cast<uint8_t>(l);
    const float q = kIq4nlValues[l], w = x[j] * x[j];
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
  uint8_t L[kQK];
  float sumqx, sumq2;
  iq4_fit(x, 1.0f / (max / -kIq4nlValues[0]), L, &sumqx, &sumq2);
  float d = sumqx / sumq2, best = d * sumqx;
  for (int t = -7; t <= 7; ++t) {
    iq4_fit(x, static_cast<float>(t + kIq4nlValues[0]) / max, nullptr, &sumqx, &sumq2);
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

}  // namespace colibri::ref
