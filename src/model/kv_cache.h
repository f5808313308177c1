// The attention key/value cache, allocated once for n_seq sequences of n_ctx
// positions, stored as F16 (half the memory and half the reads of attention,
// llama.cpp's default) or F32 (what the reference outputs we compare with
// used). Rows are written as F32 and rounded to nearest-even on the way in;
// the attention kernels read either type (tensor/ops.h attend).
#pragma once

#include <cstdint>

#include "base/aligned_buffer.h"
#include "base/error.h"
#include "model/config.h"
#include "tensor/dtype.h"

namespace colibri {

class KVCache {
 public:
  // type: DType::F16 or DType::F32.
  KVCache(const ModelConfig& c, int n_ctx, int n_seq, DType type = DType::F16);

  // Bytes per element of a cache of `type`, or an Error naming the types allowed.
  static size_t element_bytes(DType type);

  int n_ctx() const { return n_ctx_; }
  int n_seq() const { return n_seq_; }
  DType type() const { return type_; }
  size_t bytes() const { return k_.size() + v_.size(); }

  // Stores position pos of sequence seq, layer l: k (n_embd_k) and v (n_embd_v).
  void write(int seq, int l, int pos, const float* k, const float* v);

  // The (n_embd_k) key row of sequence seq, layer l, position pos, as the
  // cache's type T (float for F32, uint16_t half bits for F16).
  template <typename T>
  const T* k(int seq, int l, int pos) const {
    return reinterpret_cast<const T*>(k_.data()) + index(seq, l, pos) * n_embd_k_;
  }
  template <typename T>
  const T* v(int seq, int l, int pos) const {
    return reinterpret_cast<const T*>(v_.data()) + index(seq, l, pos) * n_embd_v_;
  }
  // Strides between positions, in elements.
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
  DType type_;
  size_t elem_;               // bytes per element
  AlignedBuffer<uint8_t> k_;  // (n_seq, n_layer, n_ctx, n_embd_k) elements
  AlignedBuffer<uint8_t> v_;  // (n_seq, n_layer, n_ctx, n_embd_v) elements
};

}  // namespace colibri
