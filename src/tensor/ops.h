// The kernels the model calls. Each has a scalar reference (kernels/ref) and
// optional ISA versions chosen at run time; tests compare them.
//
// Two numeric paths, selected per call:
//  - Precision::kNative: activations are converted to the weight type's
//    vec_dot type before the dot product (F16 for F16, BF16 for BF16, Q8_0 for
//    Q4_0/Q5_0/Q8_0/MXFP4, Q8_1 for Q4_1/Q5_1, Q8_K for the K-quants), as llama.cpp
//    computes; compared against the goldens' NAME.json.
//  - Precision::kReference: each weight row is dequantized to F32 and dotted
//    with F32 activations; compared against NAME.dequant-f32.json.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "tensor/dtype.h"
#include "tensor/quant_blocks.h"
#include "tensor/view.h"

namespace colibri {

enum class Precision { kNative, kReference };

// The activation type a weight type's dot kernel reads under `p`.
DType activation_type(DType weight, Precision p);

// Bytes needed to hold n activations converted for `weight` under `p`.
size_t activation_bytes(DType weight, Precision p, int64_t n);

// Converts n F32 activations into the form the dot kernel of `weight` takes.
void quantize_activation(DType weight, Precision p, const float* x, void* dst, int64_t n);

// y[r - r0] = dot(w row r, xq) for r in [r0, r1); xq from quantize_activation.
// `scratch` holds at least w.ne[0] floats (the reference path dequantizes a
// row into it).
void matvec_rows(const TensorView& w, Precision p, const void* xq, float* y, int64_t r0, int64_t r1,
                 float* scratch);

// Batched form of matvec_rows for prefill: y[t * y_stride + (r - r0)] =
// dot(w row r, xq + t * xq_stride) for t in [0, n_tok), r in [r0, r1).
// xq_stride is in bytes (activation_bytes of one row or more), y_stride in
// floats. Each weight row (or tile of rows) is read once per group of tokens.
// Every value equals what matvec_rows gives for that token, bit for bit.
void matmul_rows(const TensorView& w, Precision p, const void* xq, size_t xq_stride, int64_t n_tok,
                 float* y, size_t y_stride, int64_t r0, int64_t r1, float* scratch);

// Packing (kernels/kernel_table.h): weights of a type the active kernels
// have a packed form for are interleaved in groups of 16 rows at load, in
// place, so each group feeds a VNNI kernel directly. Products give the same
// values whether or not a view was packed. pack_rows needs packs() true and
// rows a multiple of 16; the view must then say packed = true, and only
// matvec_rows/matmul_rows may read it (ranges starting on a group).
bool packs(DType t, int64_t n_rows);
void pack_rows(DType t, uint8_t* data, int64_t n_rows, int64_t n);
// The same from plain rows at src into packed groups at dst, src >= dst (the
// ranges may overlap: a part read at an unaligned offset is packed down onto
// an aligned one).
void pack_rows(DType t, const uint8_t* src, uint8_t* dst, int64_t n_rows, int64_t n);

// Row r of a matrix view (packed or not) as F32 (an embedding lookup).
void dequantize_matrix_row(const TensorView& w, int64_t r, float* dst);

// One query head's attention over n_pos cached positions: out[0..head_dim_v)
// = softmax_p(scale * q . k_p) weighted sum of v_p. KV is the cache's row
// unit (tensor/kv_row.h): float (F32), uint16_t (F16 bits), block_q8_0 or
// block_q4_0 (head_dim and head_dim_v multiples of 32); strides count units.
// An F16 or block cache gives the bits an F32 cache holding the same
// (dequantized) values gives. `scores` is scratch for n_pos floats. A finite
// `sink` is one more logit in the softmax with no value (an attention sink):
// the weights sum below 1.
template <typename KV>
void attend(const float* q, const KV* k, size_t k_stride, const KV* v, size_t v_stride,
            int64_t n_pos, int head_dim, int head_dim_v, float scale, float* scores, float* out,
            float sink = -INFINITY);

// attend() for n_q query heads that share one sequence's cache (the tokens of
// a prompt batch): each cached key and value row is read once for all of
// them. Query i is at q + i * q_stride, sees positions [0, n_pos[i]) and
// writes out + i * out_stride; `scores` is scratch for n_q * max(n_pos) floats.
template <typename KV>
void attend_batch(const float* q, size_t q_stride, int n_q, const int32_t* n_pos, const KV* k,
                  size_t k_stride, const KV* v, size_t v_stride, int head_dim, int head_dim_v,
                  float scale, float* scores, float* out, size_t out_stride,
                  float sink = -INFINITY);

// y[i] = silu(g[i]) * u[i] (y may be g or u): the gated FFN's activation.
void silu_mul(const float* g, const float* u, float* y, int64_t n);

// The 64-bit words of [p, p + bytes) summed, bytes a multiple of 256: the
// active ISA's fastest read of memory (the bandwidth probe's loop).
uint64_t read_sum(const void* p, size_t bytes);

// `rounds` rounds of independent int8 multiply-accumulate chains with the
// active ISA's widest int8 product; returns the multiply-accumulates done.
uint64_t int8_peak(int64_t rounds, int32_t* sink);

// GPT-OSS's clamped SwiGLU (y may be g or u): with x = min(g, 7),
// y = x * sigmoid(1.702 x) * (clamp(u, -7, 7) + 1).
void swiglu_clamped(const float* g, const float* u, float* y, int64_t n);

// RMS norm of one row, out[i] = x[i] / rms(x) * w[i] (kernel_table.h's
// RmsNormFn: the same bits on every ISA); out may be x.
void rms_norm(const float* x, const float* w, int64_t n, float eps, float* out);

// Dequantizes n elements of type t (n a multiple of its block size).
void dequantize_row(DType t, const void* src, float* dst, int64_t n);

// The instruction sets a kernel can be written for. One binary carries all
// variants of its architecture; the best one the CPU supports is chosen at
// start-up. On AArch64: kNeon (ARMv8, e.g. Cortex-A53), kNeonDot (+ sdot,
// ARMv8.2 dotprod), kNeonI8mm (+ smmla, ARMv8.6 i8mm).
enum class Isa { kScalar, kAvx2, kAvx512, kNeon, kNeonDot, kNeonI8mm };
// Every Isa, for loops over the supported ones.
inline constexpr Isa kAllIsas[] = {Isa::kScalar, Isa::kAvx2,    Isa::kAvx512,
                                   Isa::kNeon,   Isa::kNeonDot, Isa::kNeonI8mm};

const char* isa_name(Isa isa);
bool isa_supported(Isa isa);
// The best supported ISA (what runs unless set_kernel_isa says otherwise).
Isa best_isa();
Isa active_isa();
// Selects the kernels of `isa` for all later calls (tests compare ISAs; the CLI
// can force the scalar path). Throws Error if the CPU lacks it. Not for use
// while other threads run kernels.
void set_kernel_isa(Isa isa);

// Quantizes n F32 weights to type t as ggml's reference quantizers do
// (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, MXFP4; IQ4_NL and IQ4_XS as
// llama-quantize does without an importance matrix). Throws Error for a type
// without one.
void quantize_weights(DType t, const float* src, void* dst, int64_t n);

// Conversions used around the kernels.
float fp16_to_fp32(uint16_t h);
uint16_t fp32_to_fp16(float f);
// n floats to halves (round to nearest, ties to even: fp32_to_fp16 each), with
// the CPU's conversion instructions where it has them.
void fp32_to_fp16_row(const float* x, uint16_t* dst, int64_t n);
// n floats (a multiple of 32) to q8_0 blocks with the active ISA's activation
// quantizer (the one ggml's CPU backend also writes a q8_0 KV cache with).
void fp32_to_q8_0_row(const float* x, block_q8_0* dst, int64_t n);
// n floats (a multiple of 32) to q4_0 blocks: ggml's reference quantizer
// (quantize_row_q4_0_ref, which its CPU backend writes a q4_0 KV cache
// with), the same bits on every ISA.
void fp32_to_q4_0_row(const float* x, block_q4_0* dst, int64_t n);
float bf16_to_fp32(uint16_t h);
uint16_t fp32_to_bf16(float f);

}  // namespace colibri
