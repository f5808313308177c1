// Tensor element types, numbered as GGUF/ggml number them.
//
// A quant type is an entry in a traits table (dtype.cpp, kernels/): block
// layout, scalar dequantizer, the activation type its dot kernel takes, and the
// dot kernel per ISA. Nothing outside tensor/ branches on a quant type.
#pragma once

#include <cstddef>
#include <cstdint>

namespace colibri {

enum class DType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  IQ1_M = 29,
  BF16 = 30,
  MXFP4 = 39,
};

struct DTypeInfo {
  DType type;
  const char* name;    // "q4_K", as ggml prints it
  int64_t block_size;  // elements per block
  size_t block_bytes;  // bytes per block
  bool weight;         // may appear as a weight in a model file we load
};

// nullptr for an id we do not know (the caller reports tensor and id).
const DTypeInfo* dtype_info(uint32_t raw_id);
const DTypeInfo& dtype_info(DType t);
inline const char* dtype_name(DType t) { return dtype_info(t).name; }

// Bytes of n elements (n must be a multiple of the block size).
size_t row_bytes(DType t, int64_t n);

}  // namespace colibri
