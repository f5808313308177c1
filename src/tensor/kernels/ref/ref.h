// Scalar reference kernels: the arithmetic of ggml's dequantize_row_*,
// quantize_row_*_ref and ggml_vec_dot_*_generic, written for colibri. Every
// ISA kernel is tested against these.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace colibri::ref {

void dequantize_f32(const void* src, float* dst, int64_t n);
void dequantize_f16(const void* src, float* dst, int64_t n);
void dequantize_bf16(const void* src, float* dst, int64_t n);
void dequantize_q4_0(const void* src, float* dst, int64_t n);
void dequantize_q4_1(const void* src, float* dst, int64_t n);
void dequantize_q5_0(const void* src, float* dst, int64_t n);
void dequantize_q5_1(const void* src, float* dst, int64_t n);
void dequantize_q8_0(const void* src, float* dst, int64_t n);
void dequantize_q8_1(const void* src, float* dst, int64_t n);
void dequantize_q2_K(const void* src, float* dst, int64_t n);
void dequantize_q3_K(const void* src, float* dst, int64_t n);
void dequantize_q4_K(const void* src, float* dst, int64_t n);
void dequantize_q5_K(const void* src, float* dst, int64_t n);
void dequantize_q6_K(const void* src, float* dst, int64_t n);
void dequantize_q8_K(const void* src, float* dst, int64_t n);
void dequantize_mxfp4(const void* src, float* dst, int64_t n);
void dequantize_iq4_nl(const void* src, float* dst, int64_t n);
void dequantize_iq4_xs(const void* src, float* dst, int64_t n);
void dequantize_iq2_xxs(const void* src, float* dst, int64_t n);
void dequantize_iq2_xs(const void* src, float* dst, int64_t n);
void dequantize_iq2_s(const void* src, float* dst, int64_t n);
void dequantize_iq3_xxs(const void* src, float* dst, int64_t n);
void dequantize_iq3_s(const void* src, float* dst, int64_t n);
void dequantize_iq1_s(const void* src, float* dst, int64_t n);
void dequantize_iq1_m(const void* src, float* dst, int64_t n);

// Activation quantizers (F32 -> the vec_dot types).
void quantize_f32(const float* src, void* dst, int64_t n);
void quantize_f16(const float* src, void* dst, int64_t n);
void quantize_bf16(const float* src, void* dst, int64_t n);
void quantize_q8_0(const float* src, void* dst, int64_t n);
void quantize_q8_1(const float* src, void* dst, int64_t n);
void quantize_q8_K(const float* src, void* dst, int64_t n);

// Weight quantizers (ggml's quantize_row_*_ref); q8_0 is quantize_q8_0.
void quantize_weights_q4_0(const float* src, void* dst, int64_t n);
void quantize_weights_q4_1(const float* src, void* dst, int64_t n);
void quantize_weights_q5_0(const float* src, void* dst, int64_t n);
void quantize_weights_q5_1(const float* src, void* dst, int64_t n);
void quantize_weights_mxfp4(const float* src, void* dst, int64_t n);
void quantize_weights_q2_K(const float* src, void* dst, int64_t n);
void quantize_weights_q3_K(const float* src, void* dst, int64_t n);
void quantize_weights_q4_K(const float* src, void* dst, int64_t n);
void quantize_weights_q5_K(const float* src, void* dst, int64_t n);
void quantize_weights_q6_K(const float* src, void* dst, int64_t n);
void quantize_weights_iq4_nl(const float* src, void* dst, int64_t n);
void quantize_weights_iq4_xs(const float* src, void* dst, int64_t n);

// ggml's nearest_int: round to nearest, ties to even, for |x| < 2^22.
// Inline: the searching quantizers call it in their inner loops.
inline int nearest_int(float x) {
  // Adding 1.5 * 2^23 leaves round-to-nearest-even(x) in the low mantissa bits.
  const float v = x + 12582912.f;
  int32_t i;
  std::memcpy(&i, &v, 4);
  return (i & 0x007FFFFF) - 0x00400000;
}

// Dot kernels, weight row x activation row.
float dot_f32(const void* w, const void* x, int64_t n);
float dot_f16(const void* w, const void* x, int64_t n);
float dot_bf16(const void* w, const void* x, int64_t n);
float dot_q4_0(const void* w, const void* x, int64_t n);  // x: q8_0
float dot_q5_0(const void* w, const void* x, int64_t n);  // x: q8_0
float dot_q8_0(const void* w, const void* x, int64_t n);  // x: q8_0
float dot_q4_1(const void* w, const void* x, int64_t n);  // x: q8_1
float dot_q5_1(const void* w, const void* x, int64_t n);  // x: q8_1
float dot_mxfp4(const void* w, const void* x, int64_t n);  // x: q8_0
float dot_iq4_nl(const void* w, const void* x, int64_t n);  // x: q8_0
float dot_iq4_xs(const void* w, const void* x, int64_t n);  // x: q8_K
// The codebook types (iq_grid.cpp), x: q8_K.
float dot_iq2_xxs(const void* w, const void* x, int64_t n);
float dot_iq2_xs(const void* w, const void* x, int64_t n);
float dot_iq2_s(const void* w, const void* x, int64_t n);
float dot_iq3_xxs(const void* w, const void* x, int64_t n);
float dot_iq3_s(const void* w, const void* x, int64_t n);
float dot_iq1_s(const void* w, const void* x, int64_t n);
float dot_iq1_m(const void* w, const void* x, int64_t n);
float dot_q2_K(const void* w, const void* x, int64_t n);  // x: q8_K
float dot_q3_K(const void* w, const void* x, int64_t n);  // x: q8_K
float dot_q4_K(const void* w, const void* x, int64_t n);  // x: q8_K
float dot_q5_K(const void* w, const void* x, int64_t n);  // x: q8_K
float dot_q6_K(const void* w, const void* x, int64_t n);  // x: q8_K

// Row-group packing and the scalar kernels over packed groups (packed.cpp,
// kernel_table.h's PackGroupFn and PackedTileFn).
void pack_group_q4_0(const uint8_t* src, size_t src_stride, int rows, uint8_t* dst, int64_t n);
void pack_group_q8_0(const uint8_t* src, size_t src_stride, int rows, uint8_t* dst, int64_t n);
void unpack_row_q4_0(const uint8_t* group, int i, uint8_t* dst, int64_t n);
void unpack_row_q8_0(const uint8_t* group, int i, uint8_t* dst, int64_t n);
void pack_group_mxfp4(const uint8_t* src, size_t src_stride, int rows, uint8_t* dst, int64_t n);
void unpack_row_mxfp4(const uint8_t* group, int i, uint8_t* dst, int64_t n);
void pack_group_q5_0(const uint8_t* src, size_t src_stride, int rows, uint8_t* dst, int64_t n);
void unpack_row_q5_0(const uint8_t* group, int i, uint8_t* dst, int64_t n);
void packed_q5_0(const uint8_t* w, int64_t n_groups, const uint8_t* x, size_t x_stride, int64_t nt,
                 int64_t n, float* y, size_t y_stride);
void pack_group_iq4_xs(const uint8_t* src, size_t src_stride, int rows, uint8_t* dst, int64_t n);
void unpack_row_iq4_xs(const uint8_t* group, int i, uint8_t* dst, int64_t n);
void packed_iq4_xs(const uint8_t* w, int64_t n_groups, const uint8_t* x, size_t x_stride, int64_t nt,
                   int64_t n, float* y, size_t y_stride);
void pack_group_q6_K(const uint8_t* src, size_t src_stride, int rows, uint8_t* dst, int64_t n);
void unpack_row_q6_K(const uint8_t* group, int i, uint8_t* dst, int64_t n);
void packed_q6_K(const uint8_t* w, int64_t n_groups, const uint8_t* x, size_t x_stride, int64_t nt,
                 int64_t n, float* y, size_t y_stride);
void pack_group_q4_K(const uint8_t* src, size_t src_stride, int rows, uint8_t* dst, int64_t n);
void unpack_row_q4_K(const uint8_t* group, int i, uint8_t* dst, int64_t n);
void packed_q4_K(const uint8_t* w, int64_t n_groups, const uint8_t* x, size_t x_stride, int64_t nt,
                 int64_t n, float* y, size_t y_stride);
void packed_q4_0(const uint8_t* w, int64_t n_groups, const uint8_t* x, size_t x_stride, int64_t nt,
                 int64_t n, float* y, size_t y_stride);
void packed_q8_0(const uint8_t* w, int64_t n_groups, const uint8_t* x, size_t x_stride, int64_t nt,
                 int64_t n, float* y, size_t y_stride);
void packed_mxfp4(const uint8_t* w, int64_t n_groups, const uint8_t* x, size_t x_stride, int64_t nt,
                  int64_t n, float* y, size_t y_stride);  // x: q8_0

// kernel_table.h's SiluMulFn: x / (1 + std::exp(-x)) per element.
void silu_mul(const float* g, const float* u, float* y, int64_t n);
// GPT-OSS's SwiGLU: x = min(g, 7), y = x * sigmoid(1.702 x) * (clamp(u, -7, 7) + 1).
void swiglu_clamped(const float* g, const float* u, float* y, int64_t n);
// kernel_table.h's RmsNormFn.
void rms_norm(const float* x, const float* w, int64_t n, float eps, float* out);
uint64_t read_sum(const void* p, size_t bytes);
uint64_t int8_peak(int64_t rounds, int32_t* sink);

// kernel_table.h's AttendKvFn and AttendBatchKvFn, for KV = float, uint16_t
// (F16 bits), block_q8_0 and block_q4_0: llama2.c's loops, the softmax sum in double.
template <typename KV>
void attend(const float* q, const KV* k, size_t k_stride, const KV* v, size_t v_stride, int64_t n_pos,
            int head_dim, int head_dim_v, float scale, float* scores, float* out, float sink);
template <typename KV>
void attend_batch(const float* q, size_t q_stride, int n_q, const int32_t* n_pos, const KV* k,
                  size_t k_stride, const KV* v, size_t v_stride, int head_dim, int head_dim_v,
                  float scale, float* scores, float* out, size_t out_stride, float sink);

}  // namespace colibri::ref
