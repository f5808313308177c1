// The kernels the model calls. Each has a scalar reference (kernels/ref) and
// optional ISA versions chosen at run time; tests compare them.
//
// Two numeric paths, selected per call:
//  - Precision::kNative: activations are converted to the weight type's
//    vec_dot type before the dot product (F16 for F16, BF16 for BF16, Q8_0 for
//    Q4_0/Q5_0/Q8_0, Q8_1 for Q4_1/Q5_1, Q8_K for the K-quants), as llama.cpp
//    computes; compared against the goldens' NAME.json.
//  - Precision::kReference: each weight row is dequantized to F32 and dotted
//    with F32 activations; compared against NAME.dequant-f32.json.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tensor/dtype.h"
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
void matvec_rows(const TensorView& w, Precision p, const void* xq, float* y, int64_t r0,
                 int64_t r1, float* scratch);

// Dequantizes n elements of type t (n a multiple of its block size).
void dequantize_row(DType t, const void* src, float* dst, int64_t n);

// Conversions used around the kernels.
float fp16_to_fp32(uint16_t h);
uint16_t fp32_to_fp16(float f);
float bf16_to_fp32(uint16_t h);
uint16_t fp32_to_bf16(float f);

}  // namespace colibri
