// Scalar activations, and the plain memory read the bandwidth probe uses.
#include <algorithm>
#include <cmath>

#include "tensor/kernels/ref/ref.h"

namespace colibri::ref {

void silu_mul(const float* g, const float* u, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
}

void swiglu_clamped(const float* g, const float* u, float* y, int64_t n) {
  constexpr float kAlpha = 1.702f, kLimit = 7.0f;
  for (int64_t i = 0; i < n; ++i) {
    const float x = std::min(g[i], kLimit);
    const float v = std::clamp(u[i], -kLimit, kLimit);
    y[i] = x / (1.0f + std::exp(-kAlpha * x)) * (v + 1.0f);
  }
}

void rms_norm(const float* x, const float* w, int64_t n, float eps, float* out) {
  // Eight partial sums in double: a norm sits between two parallel jobs on
  // one thread, and a single chain of dependent adds took 4 cycles an element.
  double part[8] = {};
  const int64_t n8 = n & ~int64_t{7};
  for (int64_t i = 0; i < n8; i += 8)
    for (int j = 0; j < 8; ++j) part[j] += static_cast<double>(x[i + j]) * x[i + j];
  double sum =
      ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
  for (int64_t i = n8; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  const float scale = 1.0f / std::sqrt(static_cast<float>(sum / static_cast<double>(n)) + eps);
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * scale * w[i];
}

uint64_t read_sum(const void* p, size_t bytes) {
  // Eight independent sums, so the loop waits on loads, not on one add chain.
  const auto* w = static_cast<const uint64_t*>(p);
  uint64_t s[8] = {};
  for (size_t i = 0; i + 8 <= bytes / 8; i += 8)
    for (int k = 0; k < 8; ++k) s[k] += w[i + k];
  uint64_t total = 0;
  for (uint64_t x : s) total += x;
  return total;
}

uint64_t int8_peak(int64_t rounds, int32_t* sink) {
  // Unsigned, so long runs wrap instead of overflowing a signed sum.
  uint32_t acc[8] = {};
  uint8_t u = 3;
  int8_t w = -5;
  for (int64_t r = 0; r < rounds; ++r)
    for (int k = 0; k < 8; ++k) acc[k] += static_cast<uint32_t>(static_cast<int32_t>(u) * w + k);
  uint32_t total = 0;
  for (uint32_t a : acc) total += a;
  *sink = static_cast<int32_t>(total);
  return static_cast<uint64_t>(rounds) * 8;
}

}  // namespace colibri::ref
