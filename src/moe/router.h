// Routing: router logits -> the k experts a token uses and their weights.
//
// Every family's routing is one call with options, as llama.cpp's
// build_moe_ffn computes it:
//   scores  = softmax(logits) | sigmoid(logits) | logits (kSoftmaxSelected)
//   select  = scores + selection_bias          (DeepSeek-V3, GLM: exp_probs_b)
//   groups  : keep the n_group_used groups whose two best `select` values sum
//             highest, drop the rest          (DeepSeek-V3's group-limited top-k)
//   ids     = the k largest `select` (descending; ties to the lower id)
//   weights = scores[ids] (the bias never enters them), or softmax over the k
//             selected logits (kSoftmaxSelected, GPT-OSS); then divided by
//             max(sum, 2^-14) if renormalize; then times scale.
#pragma once

#include <cstdint>

namespace colibri {

enum class Gating {
  kSoftmax,          // softmax over all experts (Mixtral, Qwen, OLMoE, DeepSeek-V2)
  kSigmoid,          // elementwise sigmoid (DeepSeek-V3, Kimi K2, GLM-4.5)
  kSoftmaxSelected,  // top-k of the logits, softmax over the k selected (GPT-OSS)
};

struct RouterOptions {
  int n_expert = 0;
  int n_expert_used = 0;  // k
  bool renormalize = false;   // divide the k weights by their sum
  Gating gating = Gating::kSoftmax;
  float scale = 1.f;          // routed scaling factor, after renormalisation
  int n_group = 1;            // experts form n_group consecutive groups
  int n_group_used = 1;       // groups kept when n_group > 1
  const float* selection_bias = nullptr;  // (n_expert) added for selection only
};

// Scratch one call needs, in floats.
constexpr int router_scratch_floats(int n_expert) { return 2 * n_expert; }

// ids and weights: k each. `scratch` holds router_scratch_floats(n_expert)
// floats. No allocation.
void route(const float* logits, const RouterOptions& o, float* scratch, int32_t* ids, float* weights);

// The gap that decides this token's selection: k-th minus (k+1)-th largest
// selection score among the kept groups, or, when groups are limited, the
// smaller of that and the group-score gap (what the reference outputs record
// as router_gap). +inf when every expert is used.
float route_gap(const float* logits, const RouterOptions& o, float* scratch);

}  // namespace colibri
