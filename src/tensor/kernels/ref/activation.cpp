// Scalar activations.
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

}  // namespace colibri::ref
