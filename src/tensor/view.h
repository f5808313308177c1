// A non-owning view of a weight tensor in its stored type.
//
// ne[0] is the contiguous dimension (a row), as in GGUF: a matrix that maps
// n_in -> n_out has ne = {n_in, n_out}; an expert stack has ne = {n_in, n_out,
// n_expert}. Rows are row_bytes(type, ne[0]) apart.
#pragma once

#include <cstdint>

#include "tensor/dtype.h"

namespace colibri {

struct TensorView {
  const uint8_t* data = nullptr;
  DType type = DType::F32;
  int64_t ne[4] = {1, 1, 1, 1};
  // Rows interleaved in groups of 16 (tensor/ops.h pack_rows): row(i) is then
  // not a row; only the matrix kernels read such a view.
  bool packed = false;

  int64_t n_rows() const { return ne[1] * ne[2] * ne[3]; }
  size_t row_stride() const { return row_bytes(type, ne[0]); }
  const uint8_t* row(int64_t i) const { return data + static_cast<size_t>(i) * row_stride(); }
  // Slab k of a 3-D tensor (one expert) as a 2-D view.
  TensorView slab(int64_t k) const {
    TensorView v = *this;
    v.data = data + static_cast<size_t>(k) * ne[1] * row_stride();
    v.ne[2] = 1;
    v.ne[3] = 1;
    return v;
  }
  size_t slab_bytes() const { return static_cast<size_t>(ne[1]) * row_stride(); }
};

}  // namespace colibri
