// The attention key/value cache, allocated once for n_seq sequences of n_ctx
// positions. F32, like the reference outputs we compare with.
#pragma once

#include <cstdint>

#include "base/aligned_buffer.h"
#include "base/error.h"
#include "model/config.h"

namespace colibri {

class KVCache {
 public:
  KVCache(const ModelConfig& c, int n_ctx, int n_seq)
      : n_layer_(c.n_layer), n_ctx_(n_ctx), n_seq_(n_seq), n_embd_k_(c.n_embd_k()),
        n_embd_v_(c.n_embd_v()) {
    CLB_CHECK(n_ctx > 0 && n_seq > 0, "context size %d and sequence count %d must be positive",
              n_ctx, n_seq);
    size_t slots = static_cast<size_t>(n_seq) * n_layer_ * n_ctx;
    k_.resize(slots * n_embd_k_);
    v_.resize(slots * n_embd_v_);
  }

  int n_ctx() const { return n_ctx_; }
  int n_seq() const { return n_seq_; }
  size_t bytes() const { return (k_.size() + v_.size()) * sizeof(float); }

  // (n_embd_k) row of sequence seq, layer l, position pos.
  float* k(int seq, int l, int pos) { return k_.data() + index(seq, l, pos) * n_embd_k_; }
  float* v(int seq, int l, int pos) { return v_.data() + index(seq, l, pos) * n_embd_v_; }
  size_t k_stride() const { return n_embd_k_; }
  size_t v_stride() const { return n_embd_v_; }

  // Copies positions [0, n) of one sequence into another (prefix reuse).
  void copy_prefix(int from, int to, int n);

 private:
  size_t index(int seq, int l, int pos) const {
    return (static_cast<size_t>(seq) * n_layer_ + l) * n_ctx_ + pos;
  }
  int n_layer_, n_ctx_, n_seq_;
  size_t n_embd_k_, n_embd_v_;
  AlignedBuffer<float> k_;  // (n_seq, n_layer, n_ctx, n_embd_k)
  AlignedBuffer<float> v_;  // (n_seq, n_layer, n_ctx, n_embd_v)
};

inline void KVCache::copy_prefix(int from, int to, int n) {
  CLB_ASSERT(n <= n_ctx_ && from < n_seq_ && to < n_seq_);
  if (from == to || n <= 0) return;
  for (int l = 0; l < n_layer_; ++l) {
    __builtin_memcpy(k(to, l, 0), k(from, l, 0), sizeof(float) * n * n_embd_k_);
    __builtin_memcpy(v(to, l, 0), v(from, l, 0), sizeof(float) * n * n_embd_v_);
  }
}

}  // namespace colibri
