// The elements of a KV cache row, the one place that knows the cache's
// element types: F32 (floats), F16 (IEEE half bits), Q8_0 (ggml's
// block_q8_0, 32 elements a block, x = d * q) and Q4_0 (block_q4_0, 32
// elements a block, x = d * (q - 8), element j < 16 the low nibble of byte
// j, element 16 + j its high nibble). A row pointer has the type of its unit
// (float, uint16_t, block_q8_0, block_q4_0) and strides between rows are
// counted in units. Every value read is exact in binary32 (a half widens
// exactly; a q8_0 or q4_0 element is an int of 8 or 4 bits times a half),
// so the attention kernels give over an F16, Q8_0 or Q4_0 cache the bits
// they give over an F32 cache holding the same values.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tensor/half.h"
#include "tensor/quant_blocks.h"

namespace colibri {

// Elements a unit of the row holds.
template <typename KV>
constexpr int kKvUnitElems = 1;
template <>
constexpr int kKvUnitElems<block_q8_0> = kQK;
template <>
constexpr int kKvUnitElems<block_q4_0> = kQK;

// Bytes of the first `elems` elements of a row (a whole number of units).
template <typename KV>
constexpr size_t kv_row_bytes(size_t elems) {
  return elems / kKvUnitElems<KV> * sizeof(KV);
}

// Where element i of a row starts (for prefetching: a block type's element's block).
template <typename KV>
inline const char* kv_addr(const KV* row, size_t i) {
  return reinterpret_cast<const char*>(row) + kv_row_bytes<KV>(i);
}

// Element i of a row as a float.
inline float kv_value(const float* row, size_t i) { return row[i]; }
inline float kv_value(const uint16_t* row, size_t i) { return half_to_float(row[i]); }
inline float kv_value(const block_q8_0* row, size_t i) {
  const block_q8_0& b = row[i / kQK];
  return static_cast<float>(b.qs[i % kQK]) * half_to_float(b.d);
}
inline float kv_value(const block_q4_0* row, size_t i) {
  const block_q4_0& b = row[i / kQK];
  const int j = static_cast<int>(i % kQK);
  const int q = j < kQK / 2 ? b.qs[j] & 0x0F : b.qs[j - kQK / 2] >> 4;
  return static_cast<float>(q - 8) * half_to_float(b.d);
}

}  // namespace colibri
