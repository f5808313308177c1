#include "moe/router.h"

#include <cmath>

namespace colibri {

void route_softmax_topk(const float* logits, const RouterOptions& o, float* probs, int32_t* ids,
                        float* weights) {
  const int n = o.n_expert;
  float max = logits[0];
  for (int e = 1; e < n; ++e) max = std::fmax(max, logits[e]);
  double sum = 0;
  for (int e = 0; e < n; ++e) {
    probs[e] = std::exp(logits[e] - max);
    sum += probs[e];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int e = 0; e < n; ++e) probs[e] *= inv;

  // Partial selection sort: k is small (2..16) next to n (8..256).
  for (int j = 0; j < o.n_expert_used; ++j) {
    int best = -1;
    for (int e = 0; e < n; ++e) {
      bool taken = false;
      for (int i = 0; i < j; ++i) taken |= ids[i] == e;
      if (!taken && (best < 0 || probs[e] > probs[best])) best = e;
    }
    ids[j] = best;
    weights[j] = probs[best];
  }
  if (o.renormalize) {
    float s = 0;
    for (int j = 0; j < o.n_expert_used; ++j) s += weights[j];
    for (int j = 0; j < o.n_expert_used; ++j) weights[j] /= s;
  }
}

}  // namespace colibri
