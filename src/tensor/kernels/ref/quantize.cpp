// Scalar activation quantizers: ggml's quantize_row_q8_0_ref, _q8_1_ref,
// _q8_K_ref and its fp32 -> fp16/bf16 conversions.
#include <cmath>
#include <cstring>

#include "tensor/half.h"
#include "tensor/kernels/ref/ref.h"
#include "tensor/quant_blocks.h"

namespace colibri::ref {

void quantize_f32(const float* src, void* dst, int64_t n) {
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}

void quantize_f16(const float* src, void* dst, int64_t n) {
  auto* h = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) h[i] = float_to_half(src[i]);
}

void quantize_bf16(const float* src, void* dst, int64_t n) {
  auto* h = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) h[i] = float_to_bf16(src[i]);
}

// d = max|x| / 127, q = roundf(x / d) (half away from zero).
void quantize_q8_0(const float* src, void* dst, int64_t n) {
  auto* y = static_cast<block_q8_0*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i, src += kQK) {
    float amax = 0.0f;
    for (int j = 0; j < kQK; ++j) amax = std::fmax(amax, std::fabs(src[j]));
    const float d = amax / 127;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = float_to_half(d);
    for (int j = 0; j < kQK; ++j) y[i].qs[j] = static_cast<int8_t>(std::roundf(src[j] * id));
  }
}

// As q8_0, plus s = d * sum(q) for the min term of q4_1/q5_1.
void quantize_q8_1(const float* src, void* dst, int64_t n) {
  auto* y = static_cast<block_q8_1*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i, src += kQK) {
    float amax = 0.0f;
    for (int j = 0; j < kQK; ++j) amax = std::fmax(amax, std::fabs(src[j]));
    const float d = amax / 127;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = float_to_half(d);
    int sum = 0;
    for (int j = 0; j < kQK; ++j) {
      y[i].qs[j] = static_cast<int8_t>(std::roundf(src[j] * id));
      sum += y[i].qs[j];
    }
    y[i].s = float_to_half(static_cast<float>(sum) * d);
  }
}

// The element of largest magnitude maps to -127 * sign (scale -127 / max), the
// others round to nearest even; d = 1 / scale in F32.
void quantize_q8_K(const float* src, void* dst, int64_t n) {
  auto* y = static_cast<block_q8_K*>(dst);
  for (int64_t i = 0; i < n / kQK_K; ++i, src += kQK_K) {
    float max = 0.0f, amax = 0.0f;
    for (int j = 0; j < kQK_K; ++j) {
      const float ax = std::fabs(src[j]);
      if (ax > amax) {
        amax = ax;
        max = src[j];
      }
    }
    if (amax == 0.0f) {
      std::memset(&y[i], 0, sizeof(y[i]));
      continue;
    }
    const float iscale = -127.f / max;
    for (int j = 0; j < kQK_K; ++j) {
      const int v = nearest_int(iscale * src[j]);
      y[i].qs[j] = static_cast<int8_t>(v < 127 ? v : 127);
    }
    for (int j = 0; j < kQK_K / 16; ++j) {
      int sum = 0;
      for (int l = 0; l < 16; ++l) sum += y[i].qs[16 * j + l];
      y[i].bsums[j] = static_cast<int16_t>(sum);
    }
    y[i].d = 1 / iscale;
  }
}

}  // namespace colibri::ref
