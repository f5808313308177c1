// The one generic transformer: every family in arch.h runs through forward().
//
// A forward step takes a batch of tokens, each with its own sequence and
// position, so the same code serves prompt prefill (one sequence, consecutive
// positions) and batched decoding of many sequences. In MoE layers the batch's
// tokens are grouped by routed expert, so each expert is fetched from the
// ExpertStore once per layer per batch and multiplied for all its tokens.
// All buffers are sized at construction: forward() does not allocate.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/aligned_buffer.h"
#include "base/thread_pool.h"
#include "model/config.h"
#include "model/kv_cache.h"
#include "model/linear.h"
#include "model/weights.h"
#include "moe/expert_store.h"
#include "moe/predict.h"
#include "moe/router.h"
#include "tensor/ops.h"

namespace colibri {

struct BatchToken {
  int32_t token = 0;
  int32_t pos = 0;       // position in its sequence
  int32_t seq = 0;       // KV cache sequence
  bool logits = false;   // produce this token's logits
};

// Per token and MoE layer: the experts chosen and their weights (k each).
struct RoutingTrace {
  int n_layer = 0, k = 0;
  std::vector<int32_t> ids;     // (n_tokens, n_layer, k); -1 in dense layers
  std::vector<float> weights;   // (n_tokens, n_layer, k)
  void resize(int n_tokens, int n_layer_, int k_) {
    n_layer = n_layer_;
    k = k_;
    ids.assign(static_cast<size_t>(n_tokens) * n_layer * k, -1);
    weights.assign(ids.size(), 0.f);
  }
  const int32_t* experts(int t, int l) const { return &ids[(static_cast<size_t>(t) * n_layer + l) * k]; }
  const float* expert_weights(int t, int l) const {
    return &weights[(static_cast<size_t>(t) * n_layer + l) * k];
  }
};

// Where a forward step's time went, layer by layer (Transformer::
// set_timeline): seconds of now_seconds(), waits as durations. For the first
// token's timeline (`colibri run --timeline`); nothing is timed when unset.
struct StepTimeline {
  struct Layer {
    double begin = 0;        // the layer starts (before waiting for its dense weights)
    double dense_wait = 0;   // waiting for its dense weights to load
    double ffn_begin = 0;    // attention done, the FFN (routing, experts) starts
    double expert_wait = 0;  // waiting for expert loads (the store's io wait)
    double end = 0;
  };
  double begin = 0, embed_wait = 0, output_begin = 0, output_wait = 0, end = 0;
  int n_tokens = 0;
  std::vector<Layer> layers;
  // One line per layer and a summary, times from t0.
  std::string format(double t0) const;
};

class Transformer {
 public:
  Transformer(const ModelConfig& cfg, const ModelWeights& w, ExpertStore& store, ThreadPool& pool,
              Precision precision, int max_batch, int n_ctx);

  // Runs the batch; writes n_vocab logits for each token with .logits set, in
  // batch order, to `logits`. `trace`, if given, must hold batch.size() tokens.
  void forward(std::span<const BatchToken> batch, KVCache& kv, float* logits,
               RoutingTrace* trace = nullptr);

  int max_batch() const { return max_batch_; }
  Precision precision() const { return precision_; }
  // Routed-token counts per (layer, expert) since construction.
  const std::vector<uint64_t>& expert_usage() const { return usage_; }
  // The next forward step records its timeline in *t (null: none).
  void set_timeline(StepTimeline* t) { timeline_ = t; }
  // Every parallel job from now on is recorded in *t, named by the step it
  // belongs to (null: stop); `colibri bench --profile`.
  void set_job_trace(JobTrace* t) { pool_.set_trace(t); }

 private:
  // attention.cpp: the block, by the family's attention kind.
  void attention_block(int l, std::span<const BatchToken> batch, KVCache& kv);
  void multi_head_attention(int l, std::span<const BatchToken> batch, KVCache& kv);
  void latent_attention(int l, std::span<const BatchToken> batch, KVCache& kv);
  // Every query head of the batch against layer l's cache (window, sinks and
  // scale as the layer has them): q_all rows of q_stride floats, outputs
  // (n_head * head_dim_v) per token to out_all.
  void attend_heads(int l, std::span<const BatchToken> batch, const KVCache& kv, const float* q_all,
                    int q_stride, float* out_all);
  // y_h = w_h . x_h for every head h of a 3-D weight (n_head slabs), all
  // heads' products one parallel job per chunk of tokens.
  void head_products(const TensorView& w, const float* x, size_t x_stride, int x_head_stride, int n, float* y,
                     size_t y_stride, int y_head_stride);
  void ffn_block(int l, int n, RoutingTrace* trace);
  // next: the weights read after down, for prefetch_next (null: unknown).
  void dense_ffn(const TensorView& gate, const TensorView& up, const TensorView& down,
                 const float* x, int n, float* out, const TensorView* next);
  // act(gate + b_gate, up + b_up) for row `row` of gate_/up_ (width F) of
  // routed expert e in layer l: the family's activation, with the experts'
  // biases where it has them.
  void expert_activation(int l, int e, int row, int F);
  void add_down_bias(int l, int e, float* y, int m);
  void moe_ffn(int l, int n, RoutingTrace* trace);
  // The routed experts experts[0..count) of layer l for their tokens among
  // the batch's n: every gate/up product in one parallel job, every down in
  // another; outputs to moe_ by (token, rank). next: the weights read after
  // this chunk (null: unknown).
  void run_experts(int l, int n, const int* experts, int count, const TensorView* next);
  // Hints the thread pool that w's first rows are the next parallel job's
  // (ThreadPool::prefetch_next); null or unloaded w: nothing.
  void prefetch_next(const TensorView* w);
  // Guesses layer l + 1's experts from the residual stream after layer l's
  // attention and hands them to the store (when it wants guesses).
  void predict_next(int l, int n);
  // The first weights layer l + 1 reads (the output matrix after the last).
  const TensorView* after_layer(int l) const;
  // y (n rows of w's outputs, stride y_stride) = w . x (n rows, stride x_stride)
  void linear(const TensorView& w, const float* x, size_t x_stride, int n, float* y,
              size_t y_stride);
  // Every matrix of outs applied to x: one quantization and one parallel job
  // when they share_input, else one product each.
  void linear_many(std::span<const LinearOut> outs, const float* x, size_t x_stride, int n);
  void rms_norm(const float* x, const float* weight, int dim, float* out) const;
  // Each of the n rows: x += out (when add), then h = rms_norm(x) with the
  // weights of norm (when given); a prompt's rows as one parallel job.
  void add_and_norm(bool add, const TensorView* norm, int n);

  StepTimeline* timeline_ = nullptr;
  const ModelConfig& cfg_;
  const ModelWeights& w_;
  ExpertStore& store_;
  ThreadPool& pool_;
  Precision precision_;
  int max_batch_;

  // Scratch, (max_batch, width) each.
  AlignedBuffer<float> x_;      // residual stream (n_embd)
  AlignedBuffer<float> h_;      // normed input of a block (n_embd)
  AlignedBuffer<float> q_;      // (n_embd_q)
  AlignedBuffer<float> k_;      // (n_embd_k)
  AlignedBuffer<float> v_;      // (n_embd_v)
  AlignedBuffer<float> att_;    // attention output (n_head * head_dim_v)
  AlignedBuffer<float> gate_;   // (n_ff_max), at least k rows
  AlignedBuffer<float> up_;     // (n_ff_max), at least k rows
  AlignedBuffer<float> out_;    // block output (n_embd)
  AlignedBuffer<float> moe_;    // per (token, rank) expert outputs (k * n_embd)
  AlignedBuffer<float> router_; // router logits (n_expert)
  AlignedBuffer<float> probs_;  // router scratch (router_scratch_floats), one per thread
  RouterOptions route_opts_;    // the model's routing; selection bias per layer
  AlignedBuffer<int32_t> sel_;  // (k) per token
  AlignedBuffer<float> selw_;   // (k) per token
  AlignedBuffer<float> scores_; // attention scores per thread (n_ctx)
  AlignedBuffer<float> rope_cos_, rope_sin_;  // (max_batch, n_rot / 2)
  AlignedBuffer<uint8_t> xq_;   // activations in the kernel's type (max(max_batch, k) rows)
  // A MoE layer's input per token in its experts' activation type, each
  // quantized once (max_batch rows), however many experts read it.
  AlignedBuffer<uint8_t> hq_;
  DType hq_type_ = DType::F32;    // their type
  AlignedBuffer<float> row_scratch_;  // per thread (max row length)
  // Tokens grouped by expert in one layer.
  AlignedBuffer<int32_t> group_tok_;   // (max_batch * k)
  AlignedBuffer<int32_t> group_rank_;  // (max_batch * k)
  AlignedBuffer<int32_t> group_expert_;  // (max_batch * k): a row's index in the chunk's experts
  AlignedBuffer<int32_t> group_count_; // (n_expert)
  AlignedBuffer<int> distinct_;        // (n_expert) experts routed to in this layer
  AlignedBuffer<float> gx_;            // gathered inputs (max_batch, n_embd)
  std::vector<uint8_t> alone_;         // (max_batch) the token is its sequence's only one in the batch
  std::vector<int> alone_list_;        // (max_batch) those tokens
  // Multi-head latent attention (MLA families only).
  static constexpr int kMlaTokenChunk = 16;  // tokens per batch of per-head products
  AlignedBuffer<float> mla_qa_;    // (max_batch, q_lora_rank)
  AlignedBuffer<float> mla_q_;     // (max_batch, n_head * (nope + rope)): q as projected
  AlignedBuffer<float> mla_kva_;   // (max_batch, kv_lora_rank + rope)
  AlignedBuffer<float> mla_o_;     // (max_batch, n_head * v): values after W_v_b
  AlignedBuffer<uint8_t> mla_xq_;  // (n_head, kMlaTokenChunk) quantized head inputs
  size_t mla_xq_row_bytes_ = 0;
  std::vector<TensorView> heads_;  // (n_head) slabs of a per-head weight
  std::vector<LinearOut> mla_outs_;  // (n_head)
  AlignedBuffer<uint8_t> embd_row_;    // a token embedding row read from the file (its stored type)
  std::vector<ExpertWeights> held_;    // (n_expert) experts acquired together
  size_t xq_row_bytes_ = 0;
  int n_ff_max_ = 0;
  int n_ctx_ = 0;
  std::vector<uint64_t> usage_;  // (n_layer, n_expert)
  // Guesses the next MoE layer's experts one layer early, when the store
  // streams them (null otherwise).
  std::unique_ptr<ExpertPredictor> predictor_;
};

}  // namespace colibri
