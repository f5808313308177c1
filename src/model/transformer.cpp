#include "model/transformer.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/error.h"
#include "base/sys.h"
#include "model/linear.h"
#include "model/rope.h"

namespace colibri {

namespace {

// Attention takes a batch's tokens this many at a time per head, so a prompt's
// consecutive tokens read each cached key and value row once for all of them
// (eight against four: OLMoE Q4_0 pp2048 164-170 -> 174-178 tok/s).
constexpr int kQueryBlock = kAttentionQueryBlock;

// The most experts run_experts runs in one chunk (a bound for its stack arrays).
constexpr int kMaxHeldExperts = 64;

}  // namespace

Transformer::Transformer(const ModelConfig& cfg, const ModelWeights& w, ExpertStore& store,
                         ThreadPool& pool, Precision precision, int max_batch, int n_ctx)
    : cfg_(cfg), w_(w), store_(store), pool_(pool), precision_(precision), max_batch_(max_batch),
      n_ctx_(n_ctx) {
  CLB_CHECK(max_batch >= 1, "batch size %d must be positive", max_batch);
  const size_t B = max_batch;
  const int k = std::max(cfg.n_expert_used, 1);
  n_ff_max_ = std::max({cfg.n_ff, cfg.n_ff_exp, cfg.n_ff_shexp, 1});
  x_.resize(B * cfg.n_embd);
  embd_row_.resize(w.token_embd.row_stride());
  h_.resize(B * cfg.n_embd);
  q_.resize(B * cfg.n_embd_q());
  k_.resize(B * cfg.n_embd_k());
  v_.resize(B * cfg.n_embd_v());
  att_.resize(B * cfg.n_head * cfg.head_dim_v);
  const size_t BK = std::max<size_t>(B, k);
  gate_.resize(BK * n_ff_max_);
  up_.resize(BK * n_ff_max_);
  out_.resize(B * cfg.n_embd);
  moe_.resize(B * k * cfg.n_embd);
  router_.resize(B * std::max(cfg.n_expert, 1));
  // Rounded to 64 bytes, so that each thread's scratch starts aligned.
  probs_.resize(static_cast<size_t>(pool.n_threads()) *
                ((router_scratch_floats(std::max(cfg.n_expert, 1)) + 15) / 16 * 16));
  route_opts_.n_expert = cfg.n_expert;
  route_opts_.n_expert_used = cfg.n_expert_used;
  route_opts_.gating = cfg.gating;
  route_opts_.renormalize = cfg.expert_weights_norm;
  route_opts_.scale = cfg.expert_weights_scale;
  route_opts_.n_group = cfg.n_expert_group;
  route_opts_.n_group_used = cfg.n_expert_group_used;
  sel_.resize(B * k);
  selw_.resize(B * k);
  scores_.resize(static_cast<size_t>(pool.n_threads()) * kQueryBlock * n_ctx);
  rope_cos_.resize(B * cfg.n_rot / 2);
  rope_sin_.resize(B * cfg.n_rot / 2);
  group_tok_.resize(B * k);
  group_rank_.resize(B * k);
  group_expert_.resize(B * k);
  group_count_.resize(std::max(cfg.n_expert, 1));
  distinct_.resize(std::max(cfg.n_expert, 1));
  gx_.resize(std::max<size_t>(B, k) * cfg.n_embd);
  alone_.assign(B, 0);
  alone_list_.assign(B, 0);
  held_.resize(std::max(cfg.n_expert, 1));
  usage_.assign(static_cast<size_t>(cfg.n_layer) * std::max(cfg.n_expert, 1), 0);
  if (store.wants_prediction() && cfg.is_moe())
    predictor_ = std::make_unique<ExpertPredictor>(cfg.n_embd, cfg.n_expert, cfg.n_expert_used,
                                                   cfg.rms_eps, precision, store.prediction_top());

  // The widest input any matrix takes, and the most bytes its activations
  // need in any weight type of this model.
  int64_t max_in = std::max({cfg.n_embd, cfg.n_head * cfg.head_dim_v, n_ff_max_, cfg.n_head * cfg.mla_v});
  xq_row_bytes_ = 0;
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_K})
    xq_row_bytes_ = std::max(xq_row_bytes_, activation_bytes(t, precision, 256 * ((max_in + 255) / 256)));
  xq_row_bytes_ = (xq_row_bytes_ + 63) / 64 * 64;
  xq_.resize(std::max<size_t>(B, k) * xq_row_bytes_);
  hq_.resize(B * xq_row_bytes_);
  row_scratch_.resize(static_cast<size_t>(pool.n_threads()) * (max_in + 256));

  if (cfg.is_mla()) {
    const int H = cfg.n_head, rope = cfg.n_rot;
    mla_qa_.resize(B * std::max(cfg.q_lora_rank, 1));
    mla_q_.resize(B * H * (cfg.mla_nope + rope));
    mla_kva_.resize(B * (cfg.kv_lora_rank + rope));
    mla_o_.resize(B * H * cfg.mla_v);
    const int64_t head_in = 256 * ((std::max(cfg.mla_nope, cfg.kv_lora_rank) + 255) / 256);
    for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_K})
      mla_xq_row_bytes_ = std::max(mla_xq_row_bytes_, activation_bytes(t, precision, head_in));
    mla_xq_row_bytes_ = (mla_xq_row_bytes_ + 63) / 64 * 64;
    mla_xq_.resize(static_cast<size_t>(H) * kMlaTokenChunk * mla_xq_row_bytes_);
    heads_.resize(H);
    mla_outs_.resize(H);
  }
}

void Transformer::rms_norm(const float* x, const float* weight, int dim, float* out) const {
  colibri::rms_norm(x, weight, dim, cfg_.rms_eps, out);
}

void Transformer::add_and_norm(bool add, const TensorView* norm, int n) {
  const int E = cfg_.n_embd;
  for_rows(pool_, "residual", n, [&](int64_t t) {
    float* x = x_.data() + t * E;
    if (add) {
      const float* o = out_.data() + t * E;
      for (int i = 0; i < E; ++i) x[i] += o[i];
    }
    if (norm) rms_norm(x, reinterpret_cast<const float*>(norm->data), E, h_.data() + t * E);
  });
}

void Transformer::prefetch_next(const TensorView* w) {
  if (w && w->data) pool_.prefetch_next(w->data, static_cast<size_t>(w->ne[1]) * w->row_stride());
}

const TensorView* Transformer::after_layer(int l) const {
  return l + 1 < cfg_.n_layer ? &w_.layers[l + 1].wq : &w_.output;
}

void Transformer::linear(const TensorView& w, const float* x, size_t x_stride, int n, float* y,
                         size_t y_stride) {
  const LinearOut out{&w, y, y_stride};
  linear_shared(pool_, precision_, std::span<const LinearOut>(&out, 1), x, x_stride, n, xq_.data(), xq_row_bytes_,
                row_scratch_.data(), row_scratch_.size() / pool_.n_threads());
}

void Transformer::linear_many(std::span<const LinearOut> outs, const float* x, size_t x_stride, int n) {
  if (share_input(outs, precision_)) {
    linear_shared(pool_, precision_, outs, x, x_stride, n, xq_.data(), xq_row_bytes_, row_scratch_.data(),
                  row_scratch_.size() / pool_.n_threads());
  } else {
    for (const LinearOut& o : outs) linear(*o.w, x, x_stride, n, o.y, o.y_stride);
  }
}

void Transformer::forward(std::span<const BatchToken> batch, KVCache& kv, float* logits,
                          RoutingTrace* trace) {
  const int n = static_cast<int>(batch.size());
  CLB_ASSERT(n >= 1 && n <= max_batch_);
  const int E = cfg_.n_embd;
  StepTimeline* tl = timeline_;
  timeline_ = nullptr;  // one step only
  double w0 = 0;
  if (tl) {
    *tl = StepTimeline{};
    tl->begin = w0 = now_seconds();
    tl->n_tokens = n;
    tl->layers.resize(cfg_.n_layer);
  }
  store_.wait_dense(0);  // the embeddings
  if (tl) tl->embed_wait = now_seconds() - w0;
  for (int t = 0; t < n; ++t) {
    const BatchToken& b = batch[t];
    CLB_CHECK(b.token >= 0 && b.token < cfg_.n_vocab, "token id %d is outside the vocabulary (%d)",
              b.token, cfg_.n_vocab);
    CLB_CHECK(b.pos >= 0 && b.pos < kv.n_ctx() && b.pos < n_ctx_,
              "position %d is outside the context (%d tokens)", b.pos, kv.n_ctx());
    CLB_CHECK(b.seq >= 0 && b.seq < kv.n_seq(), "sequence %d does not exist", b.seq);
    kv.will_write(b.seq, b.pos + 1);
  }
  // Room for the KV rows this batch writes, before any is written.
  kv.commit_growth();
  for (int t = 0; t < n; ++t) {
    const BatchToken& b = batch[t];
    // Embedding lookup: the row in its stored type, dequantized (read from
    // the file where a tight budget left the table there).
    if (store_.read_embedding_row(b.token, embd_row_.data()))
      dequantize_row(w_.token_embd.type, embd_row_.data(), x_.data() + t * E, E);
    else
      dequantize_matrix_row(w_.token_embd, b.token, x_.data() + t * E);
    // Rotation angles of this position.
    const int half = cfg_.n_rot / 2;
    rope_angles(cfg_, b.pos, rope_cos_.data() + t * half, rope_sin_.data() + t * half);
  }

  for (int l = 0; l < cfg_.n_layer; ++l) {
    // This layer's dense weights, and the next layer's router the guess
    // below reads (a first prompt may start while they still load).
    StepTimeline::Layer* lt = tl ? &tl->layers[l] : nullptr;
    if (lt) lt->begin = now_seconds();
    store_.wait_dense(l + 2);
    if (lt) lt->dense_wait = now_seconds() - lt->begin;
    const LayerWeights& L = w_.layers[l];
    // The previous layer's FFN output joins the residual stream, which is
    // normed for this layer's attention: one row-parallel job for a prompt.
    add_and_norm(l > 0, &L.attn_norm, n);
    attention_block(l, batch, kv);

    double io0 = 0;
    if (lt) {
      lt->ffn_begin = now_seconds();
      io0 = store_.stats().io_wait_s;
    }
    add_and_norm(true, &L.ffn_norm, n);
    ffn_block(l, n, trace);
    if (lt) {
      lt->expert_wait = store_.stats().io_wait_s - io0;
      lt->end = now_seconds();
    }
  }

  // Final norm and the output projection, for the tokens that want logits.
  if (tl) tl->output_begin = now_seconds();
  store_.wait_dense(cfg_.n_layer + 1);
  if (tl) tl->output_wait = now_seconds() - tl->output_begin;
  add_and_norm(true, nullptr, n);  // the last layer's FFN output
  int m = 0;
  for (int t = 0; t < n; ++t) {
    if (!batch[t].logits) continue;
    rms_norm(x_.data() + t * E, reinterpret_cast<const float*>(w_.output_norm.data), E,
             h_.data() + m * E);
    ++m;
  }
  prefetch_next(&w_.layers[0].wq);  // the next step's first weights
  pool_.name_next("output");
  if (m > 0) linear(w_.output, h_.data(), E, m, logits, cfg_.n_vocab);
  if (tl) tl->end = now_seconds();
}

std::string StepTimeline::format(double t0) const {
  std::string s = strprintf("forward step of %d token(s) from %.3f s to %.3f s (%.3f s)\n", n_tokens,
                            begin - t0, end - t0, end - begin);
  s += strprintf("  embeddings: waited %.3f s for them to load\n", embed_wait);
  s += "  layer   begins   dense wait   attention   FFN   of which expert wait\n";
  double dense = embed_wait + output_wait, experts = 0;
  for (size_t l = 0; l < layers.size(); ++l) {
    const Layer& x = layers[l];
    s += strprintf("  %5zu %8.3f %12.3f %11.3f %7.3f %12.3f\n", l, x.begin - t0, x.dense_wait,
                   x.ffn_begin - x.begin - x.dense_wait, x.end - x.ffn_begin, x.expert_wait);
    dense += x.dense_wait;
    experts += x.expert_wait;
  }
  s += strprintf("  output: waited %.3f s, done at %.3f s\n", output_wait, end - t0);
  s += strprintf("  in all: %.3f s waiting for dense weights, %.3f s for experts, %.3f s computing\n", dense,
                 experts, end - begin - dense - experts);
  return s;
}

void Transformer::predict_next(int l, int n) {
  if (!predictor_ || l + 1 >= cfg_.n_layer || !w_.layers[l + 1].moe) return;
  const LayerWeights& next = w_.layers[l + 1];
  RouterOptions ro = route_opts_;
  ro.selection_bias = reinterpret_cast<const float*>(next.exp_probs_b.data);
  std::span<const int> guess =
      predictor_->predict(x_.data(), n, reinterpret_cast<const float*>(next.ffn_norm.data), next.router,
                          reinterpret_cast<const float*>(next.router_b.data), ro);
  store_.prefetch_predicted(l + 1, guess);
}

void Transformer::dense_ffn(const TensorView& gate, const TensorView& up, const TensorView& down,
                            const float* x, int n, float* out, const TensorView* next) {
  const int E = cfg_.n_embd;
  const int F = static_cast<int>(gate.ne[1]);
  const LinearOut gate_up[] = {{&gate, gate_.data(), static_cast<size_t>(F)}, {&up, up_.data(), static_cast<size_t>(F)}};
  prefetch_next(&down);
  pool_.name_next("ffn gate+up");
  linear_many(gate_up, x, E, n);
  for_rows(pool_, "ffn activation", n, [&](int64_t t) {
    const size_t at = static_cast<size_t>(t) * F;
    silu_mul(gate_.data() + at, up_.data() + at, gate_.data() + at, F);
  });
  prefetch_next(next);
  pool_.name_next("ffn down");
  linear(down, gate_.data(), F, n, out, E);
}

void Transformer::expert_activation(int l, int e, int row, int F) {
  const LayerWeights& L = w_.layers[l];
  float* g = gate_.data() + static_cast<size_t>(row) * F;
  float* u = up_.data() + static_cast<size_t>(row) * F;
  if (L.gate_exps_b.data) {
    const float* bg = reinterpret_cast<const float*>(L.gate_exps_b.data) + static_cast<size_t>(e) * F;
    const float* bu = reinterpret_cast<const float*>(L.up_exps_b.data) + static_cast<size_t>(e) * F;
    for (int j = 0; j < F; ++j) {
      g[j] += bg[j];
      u[j] += bu[j];
    }
  }
  if (cfg_.arch->expert_activation == ExpertActivation::kSwigluClamped)
    swiglu_clamped(g, u, g, F);
  else
    silu_mul(g, u, g, F);
}

void Transformer::add_down_bias(int l, int e, float* y, int m) {
  const LayerWeights& L = w_.layers[l];
  if (!L.down_exps_b.data) return;
  const int E = cfg_.n_embd;
  const float* b = reinterpret_cast<const float*>(L.down_exps_b.data) + static_cast<size_t>(e) * E;
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < E; ++j) y[static_cast<size_t>(i) * E + j] += b[j];
}

void Transformer::ffn_block(int l, int n, RoutingTrace* trace) {
  const LayerWeights& L = w_.layers[l];
  if (L.moe) {
    moe_ffn(l, n, trace);
  } else {
    predict_next(l, n);
    dense_ffn(L.ffn_gate, L.ffn_up, L.ffn_down, h_.data(), n, out_.data(), after_layer(l));
  }
}

void Transformer::run_experts(int l, int n, const int* experts, int count, const TensorView* next) {
  const int E = cfg_.n_embd, K = cfg_.n_expert_used;
  const size_t scratch_stride = row_scratch_.size() / pool_.n_threads();
  const size_t xrb = xq_row_bytes_;
  // Rows of this chunk: expert j's tokens are rows [first[j], first[j] + m[j]).
  int first[kMaxHeldExperts], m[kMaxHeldExperts];
  int rows = 0;
  for (int j = 0; j < count; ++j) {
    first[j] = rows;
    for (int t = 0; t < n; ++t)
      for (int r = 0; r < K; ++r)
        if (sel_[t * K + r] == experts[j]) {
          group_tok_[rows] = t;
          group_rank_[rows] = r;
          group_expert_[rows] = j;
          ++rows;
        }
    m[j] = rows - first[j];
  }
  for (int j = 0; j < count; ++j) held_[j] = store_.acquire(l, experts[j]);
  prefetch_next(&held_[0].gate);  // read while the inputs are quantized
  const int F = static_cast<int>(held_[0].gate.ne[1]);
  bool joint = true;  // gate and up of every expert read one quantized input
  for (int j = 0; j < count; ++j) {
    const ExpertWeights& w = held_[j];
    joint &= activation_type(w.gate.type, precision_) == activation_type(w.up.type, precision_) &&
             w.gate.ne[1] == F && w.up.ne[1] == F && w.down.ne[0] == F;
  }
  const LayerWeights& L = w_.layers[l];
  CLB_CHECK(joint || (!L.gate_exps_b.data && cfg_.arch->expert_activation == ExpertActivation::kSilu),
            "layer %d: experts whose gate, up and down differ in type or width run only with silu and no biases", l);
  if (!joint) {  // mixed types inside an expert: one expert at a time
    for (int j = 0; j < count; ++j) {
      for (int i = 0; i < m[j]; ++i)
        std::memcpy(gx_.data() + static_cast<size_t>(first[j] + i) * E,
                    h_.data() + static_cast<size_t>(group_tok_[first[j] + i]) * E, sizeof(float) * E);
      const ExpertWeights& w = held_[j];
      float* g = gx_.data() + static_cast<size_t>(first[j]) * E;
      dense_ffn(w.gate, w.up, w.down, g, m[j], g, j + 1 < count ? &held_[j + 1].gate : next);
    }
  } else {
    // 1. Every gate and up of the chunk: one job. A token's input is
    // quantized once per layer (hq_); an expert with one token reads it in
    // place (every expert of a decode step), others copy their rows.
    LinearOut outs[2 * kMaxHeldExperts];
    auto in_place = [&](int j) {
      return m[j] == 1 && activation_type(held_[j].gate.type, precision_) == hq_type_;
    };
    for_rows(pool_, "experts input", rows, [&](int64_t i) {
      const int j = group_expert_[i];
      if (in_place(j)) return;
      const size_t t = static_cast<size_t>(group_tok_[i]);
      const DType wt = held_[j].gate.type;
      uint8_t* xq = xq_.data() + i * xrb;
      if (activation_type(wt, precision_) != hq_type_)
        quantize_activation(wt, precision_, h_.data() + t * E, xq, E);
      else
        std::memcpy(xq, hq_.data() + t * xrb, activation_bytes(wt, precision_, E));
    });
    for (int j = 0; j < count; ++j) {
      const uint8_t* xq = in_place(j) ? hq_.data() + static_cast<size_t>(group_tok_[first[j]]) * xrb
                                      : xq_.data() + first[j] * xrb;
      const size_t y = static_cast<size_t>(first[j]) * F;
      outs[2 * j] = {&held_[j].gate, gate_.data() + y, static_cast<size_t>(F), xq, m[j]};
      outs[2 * j + 1] = {&held_[j].up, up_.data() + y, static_cast<size_t>(F), xq, m[j]};
    }
    prefetch_next(&held_[0].down);
    pool_.name_next("experts gate+up");
    run_products(pool_, precision_, std::span<const LinearOut>(outs, 2 * count), 1, xq_.data(), xrb,
                 row_scratch_.data(), scratch_stride);
    // 2. Each row's activation and its down input, row by row (a prompt's
    // rows as one parallel job), then every down, each on its own rows: one job.
    for_rows(pool_, "experts activation", rows, [&](int64_t i) {
      const int j = group_expert_[i];
      expert_activation(l, experts[j], static_cast<int>(i), F);
      quantize_activation(held_[j].down.type, precision_, gate_.data() + static_cast<size_t>(i) * F,
                          xq_.data() + i * xrb, F);
    });
    for (int j = 0; j < count; ++j)
      outs[j] = {&held_[j].down, gx_.data() + static_cast<size_t>(first[j]) * E,
                 static_cast<size_t>(E), xq_.data() + first[j] * xrb, m[j]};
    prefetch_next(next);
    pool_.name_next("experts down");
    run_products(pool_, precision_, std::span<const LinearOut>(outs, count), 1, xq_.data(), xrb,
                 row_scratch_.data(), scratch_stride);
  }
  for (int j = 0; j < count; ++j) store_.release(l, experts[j]);
  // Each row's output, with its expert's down bias where the family has one
  // (mixed-type experts run without biases), to its (token, rank) slot: the
  // sum after has one fixed order, whatever the chunks were.
  for_rows(pool_, "experts output", rows, [&](int64_t i) {
    if (joint)
      add_down_bias(l, experts[group_expert_[i]], gx_.data() + static_cast<size_t>(i) * E, 1);
    std::memcpy(moe_.data() + (static_cast<size_t>(group_tok_[i]) * K + group_rank_[i]) * E,
                gx_.data() + static_cast<size_t>(i) * E, sizeof(float) * E);
  });
}

void Transformer::moe_ffn(int l, int n, RoutingTrace* trace) {
  const LayerWeights& L = w_.layers[l];
  const int E = cfg_.n_embd, X = cfg_.n_expert, K = cfg_.n_expert_used;
  RouterOptions ro = route_opts_;
  ro.selection_bias = reinterpret_cast<const float*>(L.exp_probs_b.data);

  // 1. Route every token.
  pool_.name_next("router");
  linear(L.router, h_.data(), E, n, router_.data(), X);
  // Each token's selection (a prompt's in parallel, each thread with its
  // own scratch), then the counts in token order.
  const size_t scratch = probs_.size() / pool_.n_threads();
  pool_.name_next("route");
  pool_.parallel_for(n, 4, [&](int64_t b, int64_t e, int th) {
    for (int64_t t = b; t < e; ++t) {
      float* logits = router_.data() + t * X;
      if (L.router_b.data) {
        const float* bias = reinterpret_cast<const float*>(L.router_b.data);
        for (int x = 0; x < X; ++x) logits[x] += bias[x];
      }
      route(logits, ro, probs_.data() + th * scratch, sel_.data() + t * K, selw_.data() + t * K);
    }
  });
  std::fill(group_count_.data(), group_count_.data() + X, 0);
  for (int t = 0; t < n; ++t) {
    const int32_t* ids = sel_.data() + t * K;
    const float* wts = selw_.data() + t * K;
    for (int j = 0; j < K; ++j) {
      ++group_count_[ids[j]];
      ++usage_[static_cast<size_t>(l) * X + ids[j]];
    }
    if (trace) {
      int32_t* ti = &trace->ids[(static_cast<size_t>(t) * trace->n_layer + l) * trace->k];
      float* tw = &trace->weights[(static_cast<size_t>(t) * trace->n_layer + l) * trace->k];
      std::copy(ids, ids + K, ti);
      std::copy(wts, wts + K, tw);
    }
  }

  // Every expert this layer needs, in flight at once before the first is
  // waited on (a streaming store overlaps their reads).
  int n_distinct = 0;
  for (int e = 0; e < X; ++e)
    if (group_count_[e] > 0) distinct_[n_distinct++] = e;
  store_.prefetch(l, std::span<const int>(distinct_.data(), n_distinct));
  // Then guess the next layer's, from the residual stream as it stands
  // (this layer's FFN has not added to it yet), so their loads overlap this
  // layer's compute and queue behind this layer's own.
  predict_next(l, n);

  // Every token routes somewhere: each is quantized once for the experts,
  // in the type of the layer's expert stacks (a prompt's tokens in parallel).
  hq_type_ = activation_type(w_.experts[l].gate_exps.type, precision_);
  quantize_rows(pool_, w_.experts[l].gate_exps.type, precision_, h_.data(), E, n, E, hq_.data(),
                xq_row_bytes_);

  // 2. The routed experts in chunks, each chunk's products as two parallel
  // jobs. Experts already in memory go first, in chunks as large as the
  // store can hold and the scratch rows allow; the rest one at a time, so
  // each computes as soon as its load lands while later ones still load.
  const int rows_max = static_cast<int>(std::max<size_t>(max_batch_, K));
  const int hold = std::max(1, std::min(store_.max_held(), kMaxHeldExperts));
  int n_ready = 0;
  for (int i = 0; i < n_distinct; ++i)
    if (store_.ready(l, distinct_[i])) std::swap(distinct_[n_ready++], distinct_[i]);
  for (int i0 = 0; i0 < n_distinct;) {
    int count = 1, rows = group_count_[distinct_[i0]];
    if (i0 < n_ready)
      while (i0 + count < n_ready && count < hold && rows + group_count_[distinct_[i0 + count]] <= rows_max)
        rows += group_count_[distinct_[i0 + count++]];
    // What the layer reads after the last chunk; a later chunk's experts
    // may still be loading.
    const bool last = i0 + count == n_distinct;
    run_experts(l, n, distinct_.data() + i0, count,
                last ? (L.shexp_gate.data ? &L.shexp_gate : after_layer(l)) : nullptr);
    i0 += count;
  }

  // 3. Weighted sum in rank order.
  for_rows(pool_, "experts sum", n, [&](int64_t t) {
    float* o = out_.data() + t * E;
    std::fill(o, o + E, 0.f);
    for (int j = 0; j < K; ++j) {
      const float wj = selw_[t * K + j];
      const float* y = moe_.data() + (static_cast<size_t>(t) * K + j) * E;
      for (int i = 0; i < E; ++i) o[i] += wj * y[i];
    }
  });

  // 4. Shared expert, dense, scaled by its sigmoid gate when the family has one.
  if (L.shexp_gate.data) {
    float* sh = moe_.data();  // reuse: the routed outputs are summed already
    dense_ffn(L.shexp_gate, L.shexp_up, L.shexp_down, h_.data(), n, sh, after_layer(l));
    for_rows(pool_, "shared expert gate", n, [&](int64_t t) {
      float g = 1.f;
      if (L.shexp_gate_inp.data) {
        const float* gw = reinterpret_cast<const float*>(L.shexp_gate_inp.data);
        float s = 0;
        for (int i = 0; i < E; ++i) s += gw[i] * h_[t * E + i];
        g = 1.f / (1.f + std::exp(-s));
      }
      for (int i = 0; i < E; ++i) out_[t * E + i] += g * sh[t * E + i];
    });
  }
}

}  // namespace colibri
