// Guessing the next MoE layer's experts one layer early, so their loads
// overlap this layer's compute.
//
// While layer L runs, its residual stream x (after L's attention) is already
// close to what layer L+1's router will see: the guess is
//   experts_{L+1} ~ topk(router_{L+1} . rms_norm(x) * ffn_norm_{L+1})
// for each token of the batch, and the store loads their union. The store
// measures recall against what L+1 then acquires (ExpertStoreStats::pred_*).
#pragma once

#include <cstdint>
#include <span>

#include "base/aligned_buffer.h"
#include "moe/router.h"
#include "tensor/ops.h"
#include "tensor/view.h"

namespace colibri {

class ExpertPredictor {
 public:
  // Buffers are sized here; predict() does not allocate. top: each token
  // names only its `top` likeliest experts (0: all n_expert_used).
  ExpertPredictor(int n_embd, int n_expert, int n_expert_used, float rms_eps, Precision precision,
                  int top = 0);

  // x: n rows of n_embd floats (stride n_embd), the residual stream.
  // norm: the next layer's ffn_norm (n_embd, F32); router: its ffn_gate_inp
  // (n_expert, n_embd); router_bias its bias (n_expert) or null; ro the
  // layer's routing. Returns the distinct experts among each token's `top`
  // likeliest picks, ascending; valid until the next call.
  std::span<const int> predict(const float* x, int n, const float* norm, const TensorView& router,
                               const float* router_bias, const RouterOptions& ro);

 private:
  int n_embd_, n_expert_, k_, top_;
  float rms_eps_;
  Precision precision_;
  AlignedBuffer<float> xn_;      // (n_embd) normed row
  AlignedBuffer<uint8_t> xq_;    // the row in the router's activation type
  AlignedBuffer<float> scratch_; // (n_embd + 256) for the reference path
  AlignedBuffer<float> logits_;  // (n_expert)
  AlignedBuffer<float> probs_;   // router scratch
  AlignedBuffer<int32_t> ids_;   // (k)
  AlignedBuffer<float> wts_;     // (k)
  AlignedBuffer<uint8_t> seen_;  // (n_expert)
  AlignedBuffer<int> out_;       // (n_expert)
};

}  // namespace colibri
