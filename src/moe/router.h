// Routing: router logits -> the k experts a token uses and their weights.
#pragma once

#include <cstdint>

namespace colibri {

struct RouterOptions {
  int n_expert = 0;
  int n_expert_used = 0;  // k
  bool renormalize = false;  // divide the k weights by their sum
};

// probs = softmax(logits); ids = the k largest (descending; ties to the lower
// id); weights = probs[ids], renormalised if asked. `probs` is scratch of
// n_expert floats. No allocation.
void route_softmax_topk(const float* logits, const RouterOptions& o, float* probs, int32_t* ids,
                        float* weights);

}  // namespace colibri
