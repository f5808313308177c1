// The attention block of the generic transformer: multi-head attention
// (grouped-query, optional biases, q/k norms, partial RoPE, sliding windows,
// sinks) and multi-head latent attention (DeepSeek-V2/V3, Kimi K2), both
// ending in the same per-head attention over the KV cache.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/error.h"
#include "model/linear.h"
#include "model/rope.h"
#include "model/transformer.h"

namespace colibri {

namespace {

void add_bias(float* y, const TensorView& b, int n) {
  const float* bias = reinterpret_cast<const float*>(b.data);
  for (int i = 0; i < n; ++i) y[i] += bias[i];
}

}  // namespace

void Transformer::attention_block(int l, std::span<const BatchToken> batch, KVCache& kv) {
  if (cfg_.is_mla())
    latent_attention(l, batch, kv);
  else
    multi_head_attention(l, batch, kv);
}

void Transformer::multi_head_attention(int l, std::span<const BatchToken> batch, KVCache& kv) {
  const LayerWeights& L = w_.layers[l];
  const int n = static_cast<int>(batch.size());
  const int E = cfg_.n_embd, nq = cfg_.n_embd_q(), nk = cfg_.n_embd_k(), nv = cfg_.n_embd_v();
  const int hd = cfg_.head_dim, hdv = cfg_.head_dim_v;
  const LinearOut qkv[] = {{&L.wq, q_.data(), static_cast<size_t>(nq)},
                           {&L.wk, k_.data(), static_cast<size_t>(nk)},
                           {&L.wv, v_.data(), static_cast<size_t>(nv)}};
  prefetch_next(&L.wo);  // read while the heads are rotated and attended
  pool_.name_next("q/k/v");
  linear_many(qkv, h_.data(), E, n);

  // Each token's biases, q/k norms and rotation, and its cache row: a
  // prompt's tokens in parallel (each writes its own position's row).
  const int half = cfg_.n_rot / 2;
  for_rows(pool_, "rope", n, [&](int64_t t) {
    float* q = q_.data() + t * nq;
    float* k = k_.data() + t * nk;
    float* v = v_.data() + t * nv;
    if (L.bq.data) {
      add_bias(q, L.bq, nq);
      add_bias(k, L.bk, nk);
      add_bias(v, L.bv, nv);
    }
    const float* qn = reinterpret_cast<const float*>(L.q_norm.data);
    const float* kn = reinterpret_cast<const float*>(L.k_norm.data);
    if (qn && cfg_.arch->qk_norm == QkNorm::kPerHead) {
      for (int h = 0; h < cfg_.n_head; ++h) rms_norm(q + h * hd, qn, hd, q + h * hd);
      for (int h = 0; h < cfg_.n_head_kv; ++h) rms_norm(k + h * hd, kn, hd, k + h * hd);
    } else if (qn && cfg_.arch->qk_norm == QkNorm::kFull) {
      rms_norm(q, qn, nq, q);
      rms_norm(k, kn, nk, k);
    }
    const float* cs = rope_cos_.data() + t * half;
    const float* sn = rope_sin_.data() + t * half;
    for (int h = 0; h < cfg_.n_head; ++h)
      rope_head(q + h * hd, cfg_.n_rot, cfg_.arch->rope, cs, sn);
    for (int h = 0; h < cfg_.n_head_kv; ++h)
      rope_head(k + h * hd, cfg_.n_rot, cfg_.arch->rope, cs, sn);
    kv.write(batch[t].seq, l, batch[t].pos, k, v);
  });

  attend_heads(l, batch, kv, q_.data(), nq, att_.data());
  prefetch_next(L.moe ? &L.router : &L.ffn_gate);
  pool_.name_next("attention output");
  linear(L.wo, att_.data(), cfg_.n_head * hdv, n, out_.data(), E);
  if (L.bo.data)
    for (int t = 0; t < n; ++t) add_bias(out_.data() + static_cast<size_t>(t) * E, L.bo, E);
}

void Transformer::attend_heads(int l, std::span<const BatchToken> batch, const KVCache& kv, const float* q_all,
                               int q_stride, float* out_all) {
  const LayerWeights& L = w_.layers[l];
  const int n = static_cast<int>(batch.size());
  const int hd = cfg_.head_dim, hdv = cfg_.head_dim_v, H = cfg_.n_head;
  const int group = H / cfg_.n_head_kv;
  const float* sinks = reinterpret_cast<const float*>(L.sinks.data);
  // A sliding layer's query at position p sees p - n_swa + 1 .. p.
  const int window = cfg_.is_swa(l) ? cfg_.n_swa : 0;
  auto first_pos = [&](int t) { return window ? std::max(0, batch[t].pos - window + 1) : 0; };
  // softmax(scale q . K^T [+ sink]) . V over the positions the token sees.
  // Short contexts are cheaper on one thread than the hand-off.
  int64_t work = 0;
  for (int t = 0; t < n; ++t) work += static_cast<int64_t>(batch[t].pos + 1 - first_pos(t)) * H * hd;
  const int64_t grain_all = work < (1 << 16) ? -1 : 1;
  if (pool_.trace()) {  // the cache bytes it reads, for a profile
    const size_t row = kv.head_row_bytes();
    uint64_t bytes = 0;
    for (int t = 0; t < n; ++t)
      bytes += static_cast<uint64_t>(batch[t].pos + 1 - first_pos(t)) * row;
    pool_.note_next_bytes(bytes * static_cast<uint64_t>(cfg_.n_head_kv));
  }
  const size_t out_stride = static_cast<size_t>(H) * hdv;
  auto attend_block = [&](const float* q, size_t q_step, int m, const int32_t* n_pos, int seq, int kvh, int p0,
                          float* out, size_t out_step, float sink, float* scores) {
    auto run = [&]<typename KV>(const KV*) {
      attend_batch(q, q_step, m, n_pos, kv.k<KV>(seq, l, kvh) + p0 * kv.k_stride(), kv.k_stride(),
                   kv.v<KV>(seq, l, kvh) + p0 * kv.v_stride(), kv.v_stride(), hd, hdv, cfg_.kq_scale, scores,
                   out, out_step, sink);
    };
    if (kv.type() == DType::F16)
      run(static_cast<const uint16_t*>(nullptr));
    else if (kv.type() == DType::Q8_0)
      run(static_cast<const block_q8_0*>(nullptr));
    else if (kv.type() == DType::Q4_0)
      run(static_cast<const block_q4_0*>(nullptr));
    else
      run(static_cast<const float*>(nullptr));
  };

  // A sequence's lone token in this batch (a decode step): its heads that
  // share a KV head are the queries read together (a group of up to
  // kAttentionQueryBlock), so each cached row is read once per kernel call
  // instead of once per head (on AVX-512, 16 heads a call up to 256 dims, 8
  // above: MLA's 576). Decided per token, so a sequence's result never
  // depends on the other sequences in the batch.
  // A KV head with fewer than two full groups takes groups of half that, so
  // a lone token's attention is still two items at least (MLA's 16 heads on
  // DeepSeek-V2-Lite: two of 8, not one of 16 on one thread); the choice
  // depends on the shape alone, never on the threads.
  const bool by_heads = group > 1 && !sinks;
  int n_alone = 0;
  for (int t = 0; t < n; ++t) {
    bool alone = by_heads;
    for (int u = 0; u < n && alone; ++u) alone = u == t || batch[u].seq != batch[t].seq;
    alone_[t] = alone;
    if (alone) alone_list_[n_alone++] = t;
  }
  if (n_alone > 0) {
    pool_.name_next("attention");
    const int per_item =
        group >= 2 * kAttentionQueryBlock ? kAttentionQueryBlock : kAttentionQueryBlock / 2;
    const int chunks = (group + per_item - 1) / per_item;
    const int64_t items = static_cast<int64_t>(n_alone) * cfg_.n_head_kv * chunks;
    pool_.parallel_for(items, grain_all < 0 ? items : 1, [&](int64_t i0, int64_t i1, int th) {
      float* scores = scores_.data() + static_cast<size_t>(th) * kAttentionQueryBlock * n_ctx_;
      for (int64_t item = i0; item < i1; ++item) {
        const int t = alone_list_[item / (cfg_.n_head_kv * chunks)];
        const int rest = static_cast<int>(item % (cfg_.n_head_kv * chunks));
        const int kvh = rest / chunks, h0 = kvh * group + (rest % chunks) * per_item;
        const int m = std::min(per_item, (kvh + 1) * group - h0);
        const int p0 = first_pos(t);
        int32_t n_pos[kAttentionQueryBlock];
        std::fill(n_pos, n_pos + m, batch[t].pos + 1 - p0);
        attend_block(q_all + static_cast<size_t>(t) * q_stride + static_cast<size_t>(h0) * hd, hd, m, n_pos,
                     batch[t].seq, kvh, p0, out_all + static_cast<size_t>(t) * out_stride + static_cast<size_t>(h0) * hdv,
                     hdv, -INFINITY, scores);
      }
    });
    if (n_alone == n) return;
  }

  // Prompts: a work item is one head of up to kAttentionQueryBlock
  // consecutive batch tokens, split where the sequence or the window's first
  // position changes. Items run head by head, so a thread's next item reads
  // the keys and values its last one read (a head's, up to 1 MiB at 2048 F16
  // positions) while they are still in its cache.
  const int64_t n_blocks = (n + kAttentionQueryBlock - 1) / kAttentionQueryBlock;
  const int64_t items = n_blocks * H;
  pool_.name_next("attention");
  pool_.parallel_for(items, grain_all < 0 ? items : 1, [&](int64_t i0, int64_t i1, int th) {
    float* scores = scores_.data() + static_cast<size_t>(th) * kAttentionQueryBlock * n_ctx_;
    for (int64_t item = i0; item < i1; ++item) {
      const int blk = static_cast<int>(item % n_blocks), h = static_cast<int>(item / n_blocks);
      const int kvh = h / group;
      const float sink = sinks ? sinks[h] : -INFINITY;
      const int t_end = std::min(n, (blk + 1) * kAttentionQueryBlock);
      for (int t0 = blk * kAttentionQueryBlock; t0 < t_end;) {
        if (alone_[t0]) {
          ++t0;
          continue;
        }
        const int seq = batch[t0].seq, p0 = first_pos(t0);
        int32_t n_pos[kAttentionQueryBlock];
        int m = 0;
        while (t0 + m < t_end && !alone_[t0 + m] && batch[t0 + m].seq == seq && first_pos(t0 + m) == p0) {
          n_pos[m] = batch[t0 + m].pos + 1 - p0;
          ++m;
        }
        attend_block(q_all + static_cast<size_t>(t0) * q_stride + h * hd, q_stride, m, n_pos, seq, kvh, p0,
                     out_all + static_cast<size_t>(t0) * out_stride + static_cast<size_t>(h) * hdv, out_stride, sink,
                     scores);
        t0 += m;
      }
    }
  });
}

// Multi-head latent attention in the absorbed form llama.cpp computes
// (deepseek2's graph): per token
//   q      = W_q_b . rms(W_q_a . t) | W_q . t    H heads of [q_nope (nope) | q_pe (rope)]
//   [c|kr] = W_kv_a . t,  c_n = rms(c)          the latent (R) and one rope key
//   cache  <- [c_n | rope(kr)]                  R + rope values a token and layer
//   Q_h    = [W_k_b,h . q_nope_h | rope(q_pe_h)]
//   u_h    = softmax(kq_scale Q_h . K^T) . C_n  (values: the cached latents)
//   out    = W_o . [W_v_b,h . u_h for each head]
// which equals attention over the decompressed keys and values exactly in
// real arithmetic, with a cache of R + rope floats instead of H x (nope +
// rope + v).
void Transformer::latent_attention(int l, std::span<const BatchToken> batch, KVCache& kv) {
  const LayerWeights& L = w_.layers[l];
  const int n = static_cast<int>(batch.size());
  const int E = cfg_.n_embd, H = cfg_.n_head, R = cfg_.kv_lora_rank, rope = cfg_.n_rot;
  const int nope = cfg_.mla_nope, vd = cfg_.mla_v;
  const int qw = nope + rope;      // one head of the projected q
  const int qh = cfg_.head_dim;    // one absorbed head: R + rope
  const int nq_proj = H * qw, nq = H * qh;
  const int half = rope / 2;

  // 1. Projections of the normed input: q (through the low-rank path when
  // the file has it) and the latent with the shared rope key.
  if (L.wq_a.data) {
    const int QL = cfg_.q_lora_rank;
    const LinearOut a[] = {{&L.wq_a, mla_qa_.data(), static_cast<size_t>(QL)},
                           {&L.wkv_a, mla_kva_.data(), static_cast<size_t>(R + rope)}};
    linear_many(a, h_.data(), E, n);
    const float* qa_norm = reinterpret_cast<const float*>(L.q_a_norm.data);
    for_rows(pool_, "q norm", n, [&](int64_t t) {
      rms_norm(mla_qa_.data() + t * QL, qa_norm, QL, mla_qa_.data() + t * QL);
    });
    linear(L.wq_b, mla_qa_.data(), QL, n, mla_q_.data(), nq_proj);
  } else {
    const LinearOut a[] = {{&L.wq, mla_q_.data(), static_cast<size_t>(nq_proj)},
                           {&L.wkv_a, mla_kva_.data(), static_cast<size_t>(R + rope)}};
    linear_many(a, h_.data(), E, n);
  }

  // 2. The cache row [c_n | rope(k_pe)], and the rope half of every q head.
  const float* kv_norm = reinterpret_cast<const float*>(L.kv_a_norm.data);
  for_rows(pool_, "rope", n, [&](int64_t t) {
    float* kva = mla_kva_.data() + static_cast<size_t>(t) * (R + rope);
    float* krow = k_.data() + static_cast<size_t>(t) * qh;
    rms_norm(kva, kv_norm, R, krow);
    std::memcpy(krow + R, kva + R, sizeof(float) * rope);
    const float* cs = rope_cos_.data() + t * half;
    const float* sn = rope_sin_.data() + t * half;
    rope_head(krow + R, rope, cfg_.arch->rope, cs, sn);
    kv.write(batch[t].seq, l, batch[t].pos, krow, nullptr);
    for (int h = 0; h < H; ++h) {
      const float* qp = mla_q_.data() + static_cast<size_t>(t) * nq_proj + h * qw + nope;
      float* dst = q_.data() + static_cast<size_t>(t) * nq + h * qh + R;
      std::memcpy(dst, qp, sizeof(float) * rope);
      rope_head(dst, rope, cfg_.arch->rope, cs, sn);
    }
  });

  // 3. Absorb: Q_h's latent part = W_k_b,h . q_nope_h, every head's product
  // in one parallel job (tokens in chunks, for the scratch of their inputs).
  head_products(L.wk_b, mla_q_.data(), nq_proj, qw, n, q_.data(), nq, qh);

  // 4. Attention over the cached latents; u_h lands in att_ (R per head).
  attend_heads(l, batch, kv, q_.data(), nq, att_.data());

  // 5. Values: W_v_b,h . u_h, then the output projection.
  head_products(L.wv_b, att_.data(), static_cast<size_t>(H) * R, R, n, mla_o_.data(), static_cast<size_t>(H) * vd,
                vd);
  prefetch_next(L.moe ? &L.router : &L.ffn_gate);
  linear(L.wo, mla_o_.data(), static_cast<size_t>(H) * vd, n, out_.data(), E);
}

void Transformer::head_products(const TensorView& w, const float* x, size_t x_stride, int x_head_stride, int n,
                                float* y, size_t y_stride, int y_head_stride) {
  const int H = static_cast<int>(w.ne[2]);
  const int64_t n_in = w.ne[0];
  const size_t xrb = mla_xq_row_bytes_;
  LinearOut* outs = mla_outs_.data();
  for (int t0 = 0; t0 < n; t0 += kMlaTokenChunk) {
    const int m = std::min(kMlaTokenChunk, n - t0);
    for_rows(pool_, "quantize", static_cast<int64_t>(H) * m, [&](int64_t r) {
      const int h = static_cast<int>(r / m), t = static_cast<int>(r % m);
      quantize_activation(
          w.type, precision_, x + static_cast<size_t>(t0 + t) * x_stride + h * x_head_stride,
          mla_xq_.data() + (static_cast<size_t>(h) * kMlaTokenChunk + t) * xrb, n_in);
    });
    for (int h = 0; h < H; ++h) {
      uint8_t* xq = mla_xq_.data() + static_cast<size_t>(h) * kMlaTokenChunk * xrb;
      heads_[h] = w.slab(h);
      outs[h] = {&heads_[h], y + static_cast<size_t>(t0) * y_stride + h * y_head_stride, y_stride, xq, m};
    }
    pool_.name_next("latent heads");
    run_products(pool_, precision_, std::span<const LinearOut>(outs, H), m, mla_xq_.data(), xrb,
                 row_scratch_.data(), row_scratch_.size() / pool_.n_threads());
  }
}

}  // namespace colibri
