// The attention key/value cache, allocated once for n_seq sequences of n_ctx
// positions, stored as F16 (half the memory and half the reads of attention,
// llama.cpp's default), F32 (what the reference outputs we compare with
// used), Q8_0 (ggml's blocks of 32 int8 and a half scale, 34 bytes for 32
// elements: llama.cpp's --cache-type-k/v q8_0, for long contexts, where the
// cache's reads rival the weights') or Q4_0 (32 4-bit values and a half
// scale, 18 bytes: llama.cpp's q4_0 cache, a quarter of F16's memory and
// less exact). Rows are written as F32 and rounded to nearest-even (F16) or
// quantized (Q8_0 by the activation quantizer, Q4_0 by ggml's reference
// quantizer) on the way in; the attention kernels read each type (tensor/ops.h attend). Head-major:
// one KV head's positions are consecutive rows of head_dim elements, so
// attention streams them instead of striding a page (all heads' row) per
// position, which cost a TLB miss per position at long contexts.
//
// Multi-head latent attention caches one row per token and layer, the normed
// latent followed by the rope key, and its values are the latent itself: the
// first head_dim_v elements of the key row (no separate value rows).
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <vector>

#include "base/aligned_buffer.h"
#include "base/error.h"
#include "model/config.h"
#include "tensor/dtype.h"

namespace colibri {

class KVCache {
 public:
  // type: DType::F16, F32, Q8_0 or Q4_0 (check_type).
  KVCache(const ModelConfig& c, int n_ctx, int n_seq, DType type = DType::F16);

  // An Error unless c's cache can be stored as `type`: one of the four, and
  // for Q8_0 and Q4_0 head sizes that are whole blocks of 32.
  static void check_type(const ModelConfig& c, DType type);

  int n_ctx() const { return n_ctx_; }
  int n_seq() const { return n_seq_; }
  DType type() const { return type_; }
  size_t bytes() const { return k_.size() + v_.size(); }

  // Stores position pos of sequence seq, layer l: k (n_embd_k) and v
  // (n_embd_v; ignored, may be null, when values live in the key rows).
  void write(int seq, int l, int pos, const float* k, const float* v);

  // Position 0 of KV head h's keys (values) for sequence seq, layer l, as
  // rows of the cache's unit T (float for F32, uint16_t half bits for F16,
  // block_q8_0 for Q8_0, block_q4_0 for Q4_0: tensor/kv_row.h); position p is p * k_stride()
  // (v_stride()) units further.
  template <typename T>
  const T* k(int seq, int l, int h) const {
    CLB_ASSERT(sizeof(T) == unit_);
    return reinterpret_cast<const T*>(k_.data() + index(seq, l, h) * k_row_);
  }
  template <typename T>
  const T* v(int seq, int l, int h) const {
    if (v_in_k_) return k<T>(seq, l, h);
    CLB_ASSERT(sizeof(T) == unit_);
    return reinterpret_cast<const T*>(v_.data() + index(seq, l, h) * v_row_);
  }
  size_t k_stride() const { return k_row_ / unit_; }
  size_t v_stride() const { return (v_in_k_ ? k_row_ : v_row_) / unit_; }
  // Bytes of one head's key row plus its value row (the key row alone for
  // MLA), and of one token in every layer.
  size_t head_row_bytes() const { return k_row_ + (v_in_k_ ? 0 : v_row_); }
  size_t bytes_per_token() const { return n_layer_ * n_head_kv_ * head_row_bytes(); }

  // Copies positions [0, n) of one sequence into another (prefix reuse).
  void copy_prefix(int from, int to, int n);

  // Memory that follows the context. The cache's pages cost nothing until
  // written; before rows below position `end` of sequence seq are written,
  // will_write(seq, end) raises the sequence's mark to end rounded up to
  // kMarkRows, and commit_growth() tells the listener the bytes the pages
  // below the marks may now take, if that grew (a budgeted expert store
  // gives that room back first: ExpertStore::set_kv_bytes), then makes the
  // new pages present, one call per (layer, head) block. A page first
  // touched by a write faults: 10.4-10.8 us on the reference machine (a
  // virtual machine), against 0.46 us a page populated in ranges and then 5
  // us at its first write (the hypervisor's part, which no call avoids). A
  // 512-token prompt touches 16k pages of OLMoE's cache, and every 16th
  // decode step 512. Marks never fall (finished sequences stay for prefix
  // reuse).
  static constexpr int kMarkRows = 64;
  void will_write(int seq, int end) {
    end = std::min(n_ctx_, (end + kMarkRows - 1) / kMarkRows * kMarkRows);
    if (end > mark_[seq]) mark_[seq] = end, marks_moved_ = true;
  }
  void commit_growth();
  void set_growth_listener(std::function<void(uint64_t)> f) { listener_ = std::move(f); }
  // Bytes of the pages rows below the marks can touch: per (sequence,
  // layer, head) block, the marked rows rounded out to whole pages.
  uint64_t touched_bytes() const { return touched_; }

 private:
  // The row of (seq, layer l, KV head h, position pos), in rows.
  size_t index(int seq, int l, int h, int pos = 0) const {
    return ((static_cast<size_t>(seq) * n_layer_ + l) * n_head_kv_ + h) * n_ctx_ + pos;
  }
  int n_layer_, n_head_kv_, n_ctx_, n_seq_;
  size_t hd_k_, hd_v_;  // elements per head row
  bool v_in_k_;         // values are the first hd_v_ elements of each key row (MLA)
  DType type_;
  size_t unit_;               // bytes of a row's unit (an element, or a q8_0 or q4_0 block)
  size_t k_row_, v_row_;      // bytes of one head's key row, value row
  AlignedBuffer<uint8_t> k_;  // (n_seq, n_layer, n_head_kv, n_ctx, head_dim) elements
  AlignedBuffer<uint8_t> v_;  // (n_seq, n_layer, n_head_kv, n_ctx, head_dim_v) elements
  std::vector<int> mark_;     // (n_seq) positions that may have been written
  std::vector<int> present_;  // (n_seq) positions whose pages commit_growth made present
  bool marks_moved_ = false;
  uint64_t touched_ = 0;
  std::function<void(uint64_t)> listener_;
};

}  // namespace colibri
