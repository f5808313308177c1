// Random weights for the kernel benchmarks: random quant bytes (masked with
// 0x3B, so fp16 scales stay small), and MXFP4 exponents 118..125 as in model
// files. MXFP4's exponent byte is read for its value: below e = 8 the scale
// products are float subnormals, which cost microcode assists (bench_kernels:
// 1.7x the time of 8 tokens).
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>

#include "tensor/dtype.h"

namespace colibri {

inline void fill_bench_weights(DType t, uint8_t* p, size_t bytes, std::mt19937& rng) {
  for (size_t i = 0; i < bytes; ++i) p[i] = static_cast<uint8_t>(rng() & 0x3B);
  if (t == DType::MXFP4)
    for (size_t i = 0; i < bytes; i += dtype_info(t).block_bytes)
      p[i] = static_cast<uint8_t>(118 + rng() % 8);
}

}  // namespace colibri
