// ops.h on top of the kernel table: every function here looks its type up in
// the table; none switches on a type.
#include "tensor/ops.h"

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#include "base/error.h"
#include "tensor/half.h"
#include "tensor/kernels/dispatch.h"
#include "tensor/kernels/ref/ref.h"
#include "tensor/kv_row.h"

namespace colibri {

DType activation_type(DType weight, Precision p) {
  return p == Precision::kReference ? DType::F32 : type_traits(weight).vec_dot_type;
}

size_t activation_bytes(DType weight, Precision p, int64_t n) {
  return row_bytes(activation_type(weight, p), n);
}

void fp32_to_q8_0_row(const float* x, block_q8_0* dst, int64_t n) {
  CLB_ASSERT(n % kQK == 0);
  active_kernel_table().quantize[slot(DType::Q8_0)](x, dst, n);
}

void fp32_to_q4_0_row(const float* x, block_q4_0* dst, int64_t n) {
  CLB_ASSERT(n % kQK == 0);
  type_traits(DType::Q4_0).quantize_weights(x, dst, n);
}

void quantize_activation(DType weight, Precision p, const float* x, void* dst, int64_t n) {
  const DType a = activation_type(weight, p);
  CLB_ASSERT(n % dtype_info(a).block_size == 0);
  active_kernel_table().quantize[slot(a)](x, dst, n);
}

namespace {

// Under kReference a weight row is first dequantized to F32; F32 weights need
// no such step and take the plain F32 dot either way.
bool dequantizes_rows(const TensorView& w, Precision p) {
  return p == Precision::kReference && w.type != DType::F32;
}

// Products of a type with a packed kernel: packed views are read as they
// are; plain ones are packed a group at a time into a per-thread buffer
// (grown once), so both give the packed kernel's values.
void packed_product(const KernelTable& k, const TensorView& w, const uint8_t* x, size_t x_stride,
                    int64_t n_tok, float* y, size_t y_stride, int64_t r0, int64_t r1) {
  const TypeTraits& tt = type_traits(w.type);
  const PackedTileFn f = k.packed[slot(w.type)] ? k.packed[slot(w.type)] : tt.packed_ref;
  CLB_ASSERT(f != nullptr);
  const int64_t n = w.ne[0];
  const size_t group_bytes = kPackRows * w.row_stride();
  if (w.packed) {
    CLB_ASSERT(r0 % kPackRows == 0 && r1 % kPackRows == 0);
    if (r1 > r0)
      f(w.data + (r0 / kPackRows) * group_bytes, (r1 - r0) / kPackRows, x, x_stride, n_tok, n, y,
        y_stride);
    return;
  }
  thread_local std::vector<uint8_t> group;
  thread_local std::vector<float> part;
  if (group.size() < group_bytes) group.resize(group_bytes);
  for (int64_t r = r0; r < r1; r += kPackRows) {
    const int rows = static_cast<int>(std::min<int64_t>(kPackRows, r1 - r));
    (k.pack_group[slot(w.type)] ? k.pack_group[slot(w.type)] : tt.pack_group)(w.row(r), w.row_stride(),
                                                                             rows, group.data(), n);
    if (rows == kPackRows) {
      f(group.data(), 1, x, x_stride, n_tok, n, y + (r - r0), y_stride);
      continue;
    }
    if (part.size() < static_cast<size_t>(n_tok) * kPackRows)
      part.resize(static_cast<size_t>(n_tok) * kPackRows);
    f(group.data(), 1, x, x_stride, n_tok, n, part.data(), kPackRows);
    for (int64_t t = 0; t < n_tok; ++t)
      std::memcpy(y + t * y_stride + (r - r0), part.data() + t * kPackRows, sizeof(float) * rows);
  }
}

bool uses_packed(const KernelTable& k, const TensorView& w) {
  return w.packed || k.packed[slot(w.type)] != nullptr;
}

}  // namespace

bool packs(DType t, int64_t n_rows) {
  return n_rows % kPackRows == 0 && active_kernel_table().packed[slot(t)] != nullptr &&
         type_traits(t).pack_group != nullptr;
}

void pack_rows(DType t, uint8_t* data, int64_t n_rows, int64_t n) { pack_rows(t, data, data, n_rows, n); }

void pack_rows(DType t, const uint8_t* src, uint8_t* dst, int64_t n_rows, int64_t n) {
  CLB_ASSERT(n_rows % kPackRows == 0 && src >= dst);
  const PackGroupFn fast = active_kernel_table().pack_group[slot(t)];
  const PackGroupFn pack = fast ? fast : type_traits(t).pack_group;
  CLB_ASSERT(pack != nullptr);
  const size_t stride = row_bytes(t, n), group_bytes = kPackRows * stride;
  thread_local std::vector<uint8_t> plain;  // grown once per thread
  if (plain.size() < group_bytes) plain.resize(group_bytes);
  // Group i is copied out before it is written, and the groups after it
  // start past its end: src >= dst keeps every source byte intact until read.
  for (int64_t r = 0; r < n_rows; r += kPackRows) {
    const size_t at = static_cast<size_t>(r / kPackRows) * group_bytes;
    std::memcpy(plain.data(), src + at, group_bytes);
    pack(plain.data(), stride, kPackRows, dst + at, n);
  }
}

void dequantize_matrix_row(const TensorView& w, int64_t r, float* dst) {
  CLB_ASSERT(r >= 0 && r < w.n_rows());
  const int64_t n = w.ne[0];
  const TypeTraits& tt = type_traits(w.type);
  if (!w.packed) {
    tt.dequantize(w.row(r), dst, n);
    return;
  }
  thread_local std::vector<uint8_t> plain;
  if (plain.size() < w.row_stride()) plain.resize(w.row_stride());
  tt.unpack_row(w.data + (r / kPackRows) * kPackRows * w.row_stride(), static_cast<int>(r % kPackRows),
                plain.data(), n);
  tt.dequantize(plain.data(), dst, n);
}

void matvec_rows(const TensorView& w, Precision p, const void* xq, float* y, int64_t r0, int64_t r1,
                 float* scratch) {
  CLB_ASSERT(r0 >= 0 && r0 <= r1 && r1 <= w.n_rows());
  const KernelTable& k = active_kernel_table();
  const int64_t n = w.ne[0];
  if (dequantizes_rows(w, p)) {
    const DotFn dot = k.dot[slot(DType::F32)];
    for (int64_t r = r0; r < r1; ++r) {
      dequantize_matrix_row(w, r, scratch);
      y[r - r0] = dot(scratch, xq, n);
    }
    return;
  }
  if (uses_packed(k, w)) {
    packed_product(k, w, static_cast<const uint8_t*>(xq), 0, 1, y, 0, r0, r1);
    return;
  }
  // A tile kernel streams several rows at once (more loads in flight) and
  // gives the dot kernel's values exactly.
  if (const TileFn tile = k.tile[slot(w.type)]) {
    if (r1 > r0)
      tile(w.row(r0), w.row_stride(), r1 - r0, static_cast<const uint8_t*>(xq), 0, 1, n, y, 0);
    return;
  }
  const DotFn dot = k.dot[slot(w.type)];
  CLB_ASSERT(dot != nullptr);
  for (int64_t r = r0; r < r1; ++r) y[r - r0] = dot(w.row(r), xq, n);
}

void matmul_rows(const TensorView& w, Precision p, const void* xq, size_t xq_stride, int64_t n_tok,
                 float* y, size_t y_stride, int64_t r0, int64_t r1, float* scratch) {
  CLB_ASSERT(r0 >= 0 && r0 <= r1 && r1 <= w.n_rows() && n_tok >= 0);
  const KernelTable& k = active_kernel_table();
  const int64_t n = w.ne[0];
  const auto* x = static_cast<const uint8_t*>(xq);
  if (uses_packed(k, w) && !dequantizes_rows(w, p)) {
    packed_product(k, w, x, xq_stride, n_tok, y, y_stride, r0, r1);
    return;
  }
  if (dequantizes_rows(w, p)) {
    // One dequantization per row, reused for every token.
    const DotFn dot = k.dot[slot(DType::F32)];
    for (int64_t r = r0; r < r1; ++r) {
      dequantize_matrix_row(w, r, scratch);
      for (int64_t t = 0; t < n_tok; ++t)
        y[t * y_stride + (r - r0)] = dot(scratch, x + t * xq_stride, n);
    }
    return;
  }
  const size_t w_stride = w.row_stride();
  if (const TileFn tile = k.tile[slot(w.type)]) {
    // Blocks of rows holding about 256 KB of weights (a multiple of 16 rows)
    // stay in L2 while every token of the batch reads them, and a kernel that
    // prepares activations does so once per block (q4_0, 1024 x 2048, 64
    // tokens, one core: 153 Gop/s with 64-row blocks of 8 tokens, 176 now).
    const int64_t block_rows =
        std::max<int64_t>(16, static_cast<int64_t>((256u << 10) / w_stride) / 16 * 16);
    for (int64_t rb = r0; rb < r1; rb += block_rows)
      tile(w.row(rb), w_stride, std::min(block_rows, r1 - rb), x, xq_stride, n_tok, n,
           y + (rb - r0), y_stride);
    return;
  }
  // Tiles of kRows weight rows x kTokens tokens: the tile's weights (a few KB
  // for typical rows) stay in L1 while every token of the group reads them.
  constexpr int64_t kRows = 16, kTokens = 8;
  const DotFn dot = k.dot[slot(w.type)];
  CLB_ASSERT(dot != nullptr);
  for (int64_t t0 = 0; t0 < n_tok; t0 += kTokens) {
    const int64_t t1 = std::min(n_tok, t0 + kTokens);
    for (int64_t rb = r0; rb < r1; rb += kRows) {
      const int64_t re = std::min(r1, rb + kRows);
      for (int64_t t = t0; t < t1; ++t)
        for (int64_t r = rb; r < re; ++r)
          y[t * y_stride + (r - r0)] = dot(w.row(r), x + t * xq_stride, n);
    }
  }
}

void silu_mul(const float* g, const float* u, float* y, int64_t n) { active_kernel_table().silu_mul(g, u, y, n); }

uint64_t int8_peak(int64_t rounds, int32_t* sink) { return active_kernel_table().int8_peak(rounds, sink); }

uint64_t read_sum(const void* p, size_t bytes) {
  CLB_ASSERT(bytes % 256 == 0);
  return active_kernel_table().read_sum(p, bytes);
}

void swiglu_clamped(const float* g, const float* u, float* y, int64_t n) {
  active_kernel_table().swiglu_clamped(g, u, y, n);
}

void rms_norm(const float* x, const float* w, int64_t n, float eps, float* out) {
  active_kernel_table().rms_norm(x, w, n, eps, out);
}

namespace {
// The active table's two attention entries for a cache of row unit KV.
template <typename KV>
std::pair<AttendKvFn<KV>, AttendBatchKvFn<KV>> attend_entries(const KernelTable& t) {
  if constexpr (std::is_same_v<KV, float>)
    return {t.attend, t.attend_batch};
  else if constexpr (std::is_same_v<KV, uint16_t>)
    return {t.attend_f16, t.attend_batch_f16};
  else if constexpr (std::is_same_v<KV, block_q8_0>)
    return {t.attend_q8_0, t.attend_batch_q8_0};
  else {
    static_assert(std::is_same_v<KV, block_q4_0>, "a KV cache row unit of tensor/kv_row.h");
    return {t.attend_q4_0, t.attend_batch_q4_0};
  }
}
}  // namespace

template <typename KV>
void attend(const float* q, const KV* k, size_t k_stride, const KV* v, size_t v_stride,
            int64_t n_pos, int head_dim, int head_dim_v, float scale, float* scores, float* out,
            float sink) {
  CLB_ASSERT(n_pos >= 1 && head_dim % kKvUnitElems<KV> == 0 && head_dim_v % kKvUnitElems<KV> == 0);
  attend_entries<KV>(active_kernel_table())
      .first(q, k, k_stride, v, v_stride, n_pos, head_dim, head_dim_v, scale, scores, out, sink);
}

template <typename KV>
void attend_batch(const float* q, size_t q_stride, int n_q, const int32_t* n_pos, const KV* k,
                  size_t k_stride, const KV* v, size_t v_stride, int head_dim, int head_dim_v,
                  float scale, float* scores, float* out, size_t out_stride, float sink) {
  CLB_ASSERT(n_q >= 1 && head_dim % kKvUnitElems<KV> == 0 && head_dim_v % kKvUnitElems<KV> == 0);
  for (int i = 0; i < n_q; ++i) CLB_ASSERT(n_pos[i] >= 1);
  attend_entries<KV>(active_kernel_table())
      .second(q, q_stride, n_q, n_pos, k, k_stride, v, v_stride, head_dim, head_dim_v, scale,
              scores, out, out_stride, sink);
}

#define CLB_ATTEND_FOR(KV)                                                                        \
  template void attend<KV>(const float*, const KV*, size_t, const KV*, size_t, int64_t, int, int, \
                           float, float*, float*, float);                                         \
  template void attend_batch<KV>(const float*, size_t, int, const int32_t*, const KV*, size_t,    \
                                 const KV*, size_t, int, int, float, float*, float*, size_t,      \
                                 float);
CLB_ATTEND_FOR(float)
CLB_ATTEND_FOR(uint16_t)
CLB_ATTEND_FOR(block_q8_0)
CLB_ATTEND_FOR(block_q4_0)
#undef CLB_ATTEND_FOR

void dequantize_row(DType t, const void* src, float* dst, int64_t n) {
  CLB_ASSERT(n % dtype_info(t).block_size == 0);
  type_traits(t).dequantize(src, dst, n);
}

void quantize_weights(DType t, const float* src, void* dst, int64_t n) {
  const QuantizeFn q = type_traits(t).quantize_weights;
  CLB_CHECK(q != nullptr, "quantize_weights: no quantizer for type %s", dtype_name(t));
  CLB_ASSERT(n % dtype_info(t).block_size == 0);
  q(src, dst, n);
}

float fp16_to_fp32(uint16_t h) {
  return half_to_float(h);
}
void fp32_to_fp16_row(const float* x, uint16_t* dst, int64_t n) {
  active_kernel_table().quantize[slot(DType::F16)](x, dst, n);
}

uint16_t fp32_to_fp16(float f) {
  return float_to_half(f);
}
float bf16_to_fp32(uint16_t h) {
  return bf16_to_float(h);
}
uint16_t fp32_to_bf16(float f) {
  return float_to_bf16(f);
}

}  // namespace colibri
