#include "moe/predict.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/error.h"
#include "moe/router.h"

namespace colibri {

ExpertPredictor::ExpertPredictor(int n_embd, int n_expert, int n_expert_used, float rms_eps,
                                 Precision precision, int top)
    : n_embd_(n_embd), n_expert_(n_expert), k_(n_expert_used),
      top_(top > 0 ? std::min(top, n_expert_used) : n_expert_used), rms_eps_(rms_eps), precision_(precision) {
  CLB_CHECK(n_expert >= 1 && n_expert_used >= 1 && n_expert_used <= n_expert,
            "cannot predict %d of %d experts", n_expert_used, n_expert);
  const int64_t padded = 256 * ((n_embd + 255) / 256);
  size_t xq = 0;
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_K})
    xq = std::max(xq, activation_bytes(t, precision, padded));
  xn_.resize(n_embd);
  xq_.resize(xq);
  scratch_.resize(n_embd + 256);
  logits_.resize(n_expert);
  probs_.resize(router_scratch_floats(n_expert));
  ids_.resize(n_expert_used);
  wts_.resize(n_expert_used);
  seen_.resize(n_expert);
  out_.resize(n_expert);
}

std::span<const int> ExpertPredictor::predict(const float* x, int n, const float* norm,
                                              const TensorView& router, const float* router_bias,
                                              const RouterOptions& ro) {
  CLB_ASSERT(router.ne[0] == n_embd_ && router.ne[1] == n_expert_);
  std::memset(seen_.data(), 0, n_expert_);
  for (int t = 0; t < n; ++t) {
    const float* row = x + static_cast<size_t>(t) * n_embd_;
    double sum = 0;
    for (int i = 0; i < n_embd_; ++i) sum += static_cast<double>(row[i]) * row[i];
    const float scale = 1.0f / std::sqrt(static_cast<float>(sum / n_embd_) + rms_eps_);
    for (int i = 0; i < n_embd_; ++i) xn_[i] = row[i] * scale * norm[i];
    quantize_activation(router.type, precision_, xn_.data(), xq_.data(), n_embd_);
    matvec_rows(router, precision_, xq_.data(), logits_.data(), 0, n_expert_, scratch_.data());
    if (router_bias)
      for (int e = 0; e < n_expert_; ++e) logits_[e] += router_bias[e];
    route(logits_.data(), ro, probs_.data(), ids_.data(), wts_.data());
    for (int j = 0; j < top_; ++j) seen_[ids_[j]] = 1;
  }
  int m = 0;
  for (int e = 0; e < n_expert_; ++e)
    if (seen_[e]) out_[m++] = e;
  return {out_.data(), static_cast<size_t>(m)};
}

}  // namespace colibri
