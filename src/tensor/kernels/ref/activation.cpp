// Scalar activations.
#include <cmath>

#include "tensor/kernels/ref/ref.h"

namespace colibri::ref {

void silu_mul(const float* g, const float* u, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
}

}  // namespace colibri::ref
