// The kernel table: per weight type, the dot kernel against its activation
// type (and optionally a rows x tokens tile kernel for prefill); per activation
// type, the F32 -> activation quantizer.
//
// kernels/ref fills a complete table with scalar code. Each ISA (kernels/x86,
// kernels/arm) overlays the entries it accelerates; dispatch.cpp builds the
// active table once from the CPU's features. Nothing else in colibri branches
// on a quant type or an ISA.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tensor/dtype.h"
#include "tensor/quant_blocks.h"

namespace colibri {

// dst[0..n) = the F32 values of n elements of src.
using DequantizeFn = void (*)(const void* src, float* dst, int64_t n);
// n F32 values -> n elements of an activation (or weight) type.
using QuantizeFn = void (*)(const float* src, void* dst, int64_t n);
// sum over n elements of w * x (w a weight row, x its activation row).
using DotFn = float (*)(const void* w, const void* x, int64_t n);
// y[t * y_stride + r] = dot(w + r * w_stride, x + t * x_stride) for r < nr,
// t < nt. Must give, for every (r, t), exactly the value DotFn gives.
using TileFn = void (*)(const uint8_t* w, size_t w_stride, int64_t nr, const uint8_t* x,
                        size_t x_stride, int64_t nt, int64_t n, float* y, size_t y_stride);

// What a product may assume of its quantized input. Products of one parallel
// job whose inputs stay unchanged while it runs (model/linear.h's
// run_products) share an epoch, nonzero and never used again: a packed
// kernel then keeps what it derives from an input's bytes (each block's sum
// and scale) for the job's next call on the same bytes, its other chunks and
// the sibling matrix that reads the same input, instead of deriving it
// again per call. 0, the default: no such promise, derived every call.
inline thread_local uint64_t t_input_epoch = 0;

// Sets t_input_epoch for its lifetime (the thread's part of one job).
class InputEpochScope {
 public:
  explicit InputEpochScope(uint64_t epoch) : saved_(t_input_epoch) { t_input_epoch = epoch; }
  ~InputEpochScope() { t_input_epoch = saved_; }
  InputEpochScope(const InputEpochScope&) = delete;
  InputEpochScope& operator=(const InputEpochScope&) = delete;

 private:
  uint64_t saved_;
};

// A fresh epoch (thread-safe; never 0).
uint64_t next_input_epoch();

// One query head against its cached keys and values, stored as KV (rows of
// float, uint16_t F16 bits, block_q8_0 or block_q4_0, read exactly as the floats they
// hold, tensor/kv_row.h; strides in those units): scores[p] = scale *
// dot(q, k + p * k_stride) for p < n_pos, softmax over them, out[0..head_dim_v) = sum_p softmax_p *
// (v + p * v_stride). `scores` holds n_pos floats of scratch. `sink` (-inf: none) is a learned
// logit that joins the softmax's denominator and adds no value (GPT-OSS's attention sinks): the
// weights then sum to less than 1. An F16, Q8_0 or Q4_0 cache gives what an F32 cache holding the
// same values gives. Q8_0, Q4_0: head_dim and head_dim_v are multiples of 32.
template <typename KV>
using AttendKvFn = void (*)(const float* q, const KV* k, size_t k_stride, const KV* v, size_t v_stride,
                            int64_t n_pos, int head_dim, int head_dim_v, float scale, float* scores,
                            float* out, float sink);

// Several query heads against one sequence's cache: query i (at q + i *
// q_stride) sees positions [0, n_pos[i]) and writes out + i * out_stride.
// `scores` holds n_q * max(n_pos) floats of scratch. Equals attend() per query
// up to float summation order.
template <typename KV>
using AttendBatchKvFn = void (*)(const float* q, size_t q_stride, int n_q, const int32_t* n_pos,
                                 const KV* k, size_t k_stride, const KV* v, size_t v_stride,
                                 int head_dim, int head_dim_v, float scale, float* scores, float* out,
                                 size_t out_stride, float sink);

// y[i] = silu(g[i]) * u[i], silu(x) = x / (1 + e^-x): the gated FFN's
// activation. y may be g or u. Each y[i] depends on g[i] and u[i] alone, not
// on n or i (batches are cut differently under different budgets).
using SiluMulFn = void (*)(const float* g, const float* u, float* y, int64_t n);
// GPT-OSS's clamped SwiGLU, y[i] = x sigmoid(1.702 x) (clamp(u[i], -7, 7) + 1)
// with x = min(g[i], 7), under SiluMulFn's rules (y may be g or u; each y[i]
// depends on g[i] and u[i] alone).
using SwigluFn = SiluMulFn;
// RMS norm of one row: out[i] = x[i] * s * w[i] (two float products, in that
// order), s = 1 / sqrt(float(sumsq / n) + eps), sumsq in double as eight
// partial sums (element i into i mod 8, whole groups of 8), combined ((0 + 1)
// + (2 + 3)) + ((4 + 5) + (6 + 7)), then the tail's squares in order (a
// float's square is exact in double, so fused or not is the same). Every ISA
// gives these bits. out may be x.
using RmsNormFn = void (*)(const float* x, const float* w, int64_t n, float eps, float* out);
// The 64-bit words of [p, p + bytes) summed (wrapping), bytes a multiple of
// 256: the fastest way the ISA reads memory (the widest loads, independent
// sums, no stores). The bandwidth probe that percentages of the roofline
// are measured against (engine/bench.h).
using ReadSumFn = uint64_t (*)(const void* p, size_t bytes);
// The int8 peak: `rounds` rounds of independent u8 x s8 multiply-accumulate
// chains with the ISA's widest int8 product instruction (vpdpbusd on zmm
// with AVX-512 VNNI), and no loads; returns the multiply-accumulates done
// (the result is kept so the work is not optimised away: *sink gets it).
using Int8PeakFn = uint64_t (*)(int64_t rounds, int32_t* sink);

// Weights packed in groups of kPackRows rows (kernels/ref/packed.cpp gives
// the layout per type). PackGroupFn writes one group from `rows` (<= 16)
// source rows `src_stride` bytes apart; rows past them are zero and add
// nothing. PackedTileFn: y[t * y_stride + r] = the dot of row r of n_groups
// consecutive packed groups (starting at w) with token t's activations, for
// r < 16 n_groups, t < nt; every (r, t) gets exactly the value it would get
// alone (the packed arithmetic of kernels/ref/packed.cpp).
constexpr int kPackRows = 16;
using PackGroupFn = void (*)(const uint8_t* src, size_t src_stride, int rows, uint8_t* dst,
                             int64_t n);
// Row i (< 16) of a packed group back in the plain layout.
using UnpackRowFn = void (*)(const uint8_t* group, int i, uint8_t* dst, int64_t n);
using PackedTileFn = void (*)(const uint8_t* w, int64_t n_groups, const uint8_t* x,
                              size_t x_stride, int64_t nt, int64_t n, float* y, size_t y_stride);

// DType ids are < 40 (ggml numbering, MXFP4 = 39); entries are indexed by id.
constexpr int kTypeSlots = 40;
constexpr int slot(DType t) {
  return static_cast<int>(t);
}

struct KernelTable {
  DotFn dot[kTypeSlots] = {};            // by weight type
  TileFn tile[kTypeSlots] = {};          // by weight type; null: dot per pair
  QuantizeFn quantize[kTypeSlots] = {};  // by activation type
  // By weight type: set where an ISA has a packed kernel. Then every product
  // of that type runs it (weights not packed at load are packed a group at a
  // time on the way), so results never depend on whether weights were packed.
  PackedTileFn packed[kTypeSlots] = {};
  // By weight type: the packed layout written faster than TypeTraits'
  // reference (the same bytes); null: the reference.
  PackGroupFn pack_group[kTypeSlots] = {};
  AttendKvFn<float> attend = nullptr;
  AttendBatchKvFn<float> attend_batch = nullptr;
  AttendKvFn<uint16_t> attend_f16 = nullptr;
  AttendBatchKvFn<uint16_t> attend_batch_f16 = nullptr;
  AttendKvFn<block_q8_0> attend_q8_0 = nullptr;
  AttendBatchKvFn<block_q8_0> attend_batch_q8_0 = nullptr;
  AttendKvFn<block_q4_0> attend_q4_0 = nullptr;
  AttendBatchKvFn<block_q4_0> attend_batch_q4_0 = nullptr;
  SiluMulFn silu_mul = nullptr;
  SwigluFn swiglu_clamped = nullptr;
  RmsNormFn rms_norm = nullptr;
  ReadSumFn read_sum = nullptr;
  Int8PeakFn int8_peak = nullptr;
};

// Per weight type, independent of the ISA.
struct TypeTraits {
  DequantizeFn dequantize = nullptr;      // scalar reference, exactly ggml's
  DType vec_dot_type = DType::F32;        // activation type under Precision::kNative
  QuantizeFn quantize_weights = nullptr;  // F32 -> this type; null where not written
  PackGroupFn pack_group = nullptr;       // the packed layout; null: never packed
  UnpackRowFn unpack_row = nullptr;
  PackedTileFn packed_ref = nullptr;      // scalar kernel over packed groups
};
const TypeTraits& type_traits(DType t);

// The scalar reference table (complete for every weight and activation type).
const KernelTable& ref_kernel_table();

// ISA overlays: set the entries this ISA implements. Defined only where the
// compiler can build them; see dispatch.cpp.
void add_avx2_kernels(KernelTable& t);
void add_avx512_kernels(KernelTable& t);
void add_avx512_packed_kernels(KernelTable& t);
// AArch64: plain NEON (every CPU), then sdot, then smmla prompt tiles, each
// level overlaying the one before (kernels/arm).
void add_neon_kernels(KernelTable& t);
void add_neon_dotprod_kernels(KernelTable& t);
void add_neon_i8mm_kernels(KernelTable& t);
// On every AArch64 level, where the CPU has them: F16 dots on fmlal
// (FEAT_FHM) and BF16 dots on bfmlalb / bfmlalt (FEAT_BF16), to the bit the
// plain level's values.
void add_neon_fhm_kernels(KernelTable& t);
void add_neon_bf16_kernels(KernelTable& t);

}  // namespace colibri
