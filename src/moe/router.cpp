#include "moe/router.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace colibri {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// scores <- gating(logits); select <- scores + bias, with the groups outside
// the n_group_used best set to -inf. Returns the group gap (inf if no groups).
float score(const float* logits, const RouterOptions& o, float* scores, float* select) {
  const int n = o.n_expert;
  switch (o.gating) {
    case Gating::kSoftmax: {
      float max = logits[0];
      for (int e = 1; e < n; ++e) max = std::fmax(max, logits[e]);
      double sum = 0;  // summed in double, as ggml's soft_max does
      for (int e = 0; e < n; ++e) {
        scores[e] = std::exp(logits[e] - max);
        sum += scores[e];
      }
      const float inv = static_cast<float>(1.0 / sum);
      for (int e = 0; e < n; ++e) scores[e] *= inv;
      break;
    }
    case Gating::kSigmoid:
      for (int e = 0; e < n; ++e) scores[e] = 1.f / (1.f + std::exp(-logits[e]));
      break;
    case Gating::kSoftmaxSelected:
      for (int e = 0; e < n; ++e) scores[e] = logits[e];
      break;
  }
  for (int e = 0; e < n; ++e) select[e] = o.selection_bias ? scores[e] + o.selection_bias[e] : scores[e];
  if (o.n_group <= 1) return std::numeric_limits<float>::infinity();

  // Group score: the sum of the group's two largest selection scores (the
  // one score of a one-expert group).
  const int per = n / o.n_group;
  float gscore[256];
  for (int g = 0; g < o.n_group; ++g) {
    float a = kNegInf, b = kNegInf;
    for (int e = g * per; e < (g + 1) * per; ++e) {
      if (select[e] > a) {
        b = a;
        a = select[e];
      } else if (select[e] > b) {
        b = select[e];
      }
    }
    gscore[g] = per >= 2 ? a + b : a;
  }
  // Keep the n_group_used best groups (ties to the lower group).
  bool keep[256] = {};
  float last_kept = 0, best_dropped = kNegInf;
  for (int j = 0; j < o.n_group_used; ++j) {
    int best = -1;
    for (int g = 0; g < o.n_group; ++g)
      if (!keep[g] && (best < 0 || gscore[g] > gscore[best])) best = g;
    keep[best] = true;
    last_kept = gscore[best];
  }
  for (int g = 0; g < o.n_group; ++g) {
    if (!keep[g]) {
      best_dropped = std::max(best_dropped, gscore[g]);
      for (int e = g * per; e < (g + 1) * per; ++e) select[e] = kNegInf;
    }
  }
  return last_kept - best_dropped;
}

// The k largest of select (descending, ties to the lower id).
void top_k(const float* select, int n, int k, int32_t* ids) {
  for (int j = 0; j < k; ++j) {
    int best = -1;
    for (int e = 0; e < n; ++e) {
      bool taken = false;
      for (int i = 0; i < j; ++i) taken |= ids[i] == e;
      if (!taken && (best < 0 || select[e] > select[best])) best = e;
    }
    ids[j] = best;
  }
}

}  // namespace

void route(const float* logits, const RouterOptions& o, float* scratch, int32_t* ids, float* weights) {
  const int n = o.n_expert, k = o.n_expert_used;
  float* scores = scratch;
  float* select = scratch + n;
  score(logits, o, scores, select);
  top_k(select, n, k, ids);
  if (o.gating == Gating::kSoftmaxSelected) {
    float max = scores[ids[0]];
    for (int j = 1; j < k; ++j) max = std::fmax(max, scores[ids[j]]);
    double sum = 0;
    for (int j = 0; j < k; ++j) {
      weights[j] = std::exp(scores[ids[j]] - max);
      sum += weights[j];
    }
    const float inv = static_cast<float>(1.0 / sum);
    for (int j = 0; j < k; ++j) weights[j] *= inv;
  } else {
    for (int j = 0; j < k; ++j) weights[j] = scores[ids[j]];
  }
  if (o.renormalize) {
    float s = 0;
    for (int j = 0; j < k; ++j) s += weights[j];
    s = std::max(s, 6.103515625e-5f);  // 2^-14: sigmoid weights can all be ~0
    for (int j = 0; j < k; ++j) weights[j] /= s;
  }
  if (o.scale != 0.f && o.scale != 1.f)
    for (int j = 0; j < k; ++j) weights[j] *= o.scale;
}

float route_gap(const float* logits, const RouterOptions& o, float* scratch) {
  const int n = o.n_expert, k = o.n_expert_used;
  if (k >= n) return std::numeric_limits<float>::infinity();
  float* scores = scratch;
  float* select = scratch + n;
  const float group_gap = score(logits, o, scores, select);
  // Softmax is monotonic: without a bias its gap is measured in logits.
  if (o.gating == Gating::kSoftmax && !o.selection_bias && o.n_group <= 1) std::copy(logits, logits + n, select);
  std::sort(select, select + n, [](float a, float b) { return a > b; });
  return std::min(group_gap, select[k - 1] - select[k]);
}

}  // namespace colibri
