// Matrix products of the forward pass split across the thread pool: several
// matrices that read one input share its quantization and one parallel job.
// Internal to model/ (transformer.cpp and attention.cpp).
#pragma once

#include <algorithm>
#include <span>

#include "base/thread_pool.h"
#include "tensor/kernels/kernel_table.h"
#include "tensor/ops.h"
#include "tensor/view.h"

namespace colibri {

// One matrix of a product whose input it may share with others.
struct LinearOut {
  const TensorView* w;
  float* y;         // (n, y_stride)
  size_t y_stride;
  const uint8_t* xq = nullptr;  // its own quantized input; null: the shared one
  int n = 0;                    // its own token count; 0: the call's
};

// Whether the matrices read the same input in the same quantized form, so one
// quantization and one parallel job can serve them all.
inline bool share_input(std::span<const LinearOut> outs, Precision p) {
  for (const LinearOut& o : outs)
    if (o.w->ne[0] != outs[0].w->ne[0] || activation_type(o.w->type, p) != activation_type(outs[0].w->type, p))
      return false;
  return true;
}

// y_i = w_i . x for every matrix in `outs` (all with share_input): x is
// quantized once into xq, and the threads split the matrices' rows together,
// so the k small products of a decode step cost one hand-off instead of k.
// The products of `outs` (inputs already quantized: each output's own xq, or
// the shared `xq`) as one parallel job.
inline void run_products(ThreadPool& pool, Precision p, std::span<const LinearOut> outs, int n, const uint8_t* xq,
                  size_t xq_row_bytes, float* row_scratch, size_t scratch_stride) {
  int64_t n_rows = 0;
  size_t bytes = 0, weight_bytes = 0;
  uint64_t macs = 0;
  for (const LinearOut& o : outs) {
    n_rows += o.w->ne[1];
    macs += static_cast<uint64_t>(o.w->ne[1]) * static_cast<uint64_t>(o.w->ne[0]) * (o.n ? o.n : n);
    weight_bytes += static_cast<size_t>(o.w->ne[1]) * o.w->row_stride();
    bytes += static_cast<size_t>(o.w->ne[1]) * o.w->row_stride() * (o.n ? o.n : n);
  }
  pool.note_next_bytes(weight_bytes);
  pool.note_next_macs(macs);
  // Rows are split across threads in blocks of 16 to keep SIMD tiles whole,
  // each block weighing its product's token count: a prompt's experts differ
  // in tokens, and a split by rows left one thread with the heavy ones while
  // the other waited (`colibri bench --profile`'s "idle at end"). A block goes
  // to the chunk that holds its first unit. A decode step's blocks weigh 1
  // each: the split by rows. A product under ~64 KiB of weights is not worth
  // waking another thread for.
  auto weight = [&](const LinearOut& o) -> int64_t { return o.n ? o.n : n; };
  int64_t n_units = 0;
  for (const LinearOut& o : outs) n_units += (o.w->ne[1] + 15) / 16 * weight(o);
  const int64_t grain = bytes < (64u << 10) ? n_units : 1;
  // The inputs stay as they are until the job ends: a kernel may keep what
  // it derives from them across its calls (kernels/kernel_table.h).
  const uint64_t epoch = next_input_epoch();
  pool.parallel_for(n_units, grain, [&](int64_t b, int64_t e, int th) {
    const InputEpochScope inputs(epoch);
    float* scratch = row_scratch + th * scratch_stride;
    int64_t first = 0;  // the current matrix's first unit in [0, n_units)
    for (const LinearOut& o : outs) {
      const int64_t rows = o.w->ne[1], w = weight(o), units = (rows + 15) / 16 * w;
      const int64_t u0 = std::max(b, first) - first, u1 = std::min(e, first + units) - first;
      first += units;
      if (u0 >= u1) continue;
      // The blocks whose first unit (block k starts at unit k * w) is in [u0, u1).
      const int64_t r0 = (u0 + w - 1) / w * 16, r1 = std::min(rows, (u1 + w - 1) / w * 16);
      if (r0 >= r1) continue;
      const uint8_t* in = o.xq ? o.xq : xq;
      if (w == 1)
        matvec_rows(*o.w, p, in, o.y + r0, r0, r1, scratch);
      else
        matmul_rows(*o.w, p, in, xq_row_bytes, w, o.y + r0, o.y_stride, r0, r1, scratch);
    }
  });
}

// fn(row) for rows [0, n): a prompt's rows as one parallel job (`what` in a
// trace), a decode step's single row on the calling thread. For the per-row
// work between two products (quantizing their inputs, activations), which
// would otherwise leave the other threads idle for a prompt's hundreds of
// rows; each row's result does not depend on the split.
template <typename Fn>
inline void for_rows(ThreadPool& pool, const char* what, int64_t n, Fn&& fn) {
  if (n <= 1) {
    if (n == 1) fn(int64_t{0});
    return;
  }
  pool.name_next(what);
  pool.parallel_for(n, 4, [&](int64_t b, int64_t e, int) {
    for (int64_t r = b; r < e; ++r) fn(r);
  });
}

// Rows x[t] (t < n) quantized as the activations of weight type `type` into
// xq (xq_row_bytes apart).
inline void quantize_rows(ThreadPool& pool, DType type, Precision p, const float* x,
                          size_t x_stride, int n, int64_t n_in, uint8_t* xq, size_t xq_row_bytes) {
  for_rows(pool, "quantize", n, [&](int64_t t) {
    quantize_activation(type, p, x + t * x_stride, xq + t * xq_row_bytes, n_in);
  });
}

inline void linear_shared(ThreadPool& pool, Precision p, std::span<const LinearOut> outs, const float* x, size_t x_stride,
                   int n, uint8_t* xq, size_t xq_row_bytes, float* row_scratch, size_t scratch_stride) {
  const TensorView& w0 = *outs[0].w;
  quantize_rows(pool, w0.type, p, x, x_stride, n, w0.ne[0], xq, xq_row_bytes);
  run_products(pool, p, outs, n, xq, xq_row_bytes, row_scratch, scratch_stride);
}

}  // namespace colibri
