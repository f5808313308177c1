// Random weights for synthetic models: per-row random streams, random
// quant blocks of a given spread, and the constant channel of the embedding
// rows (see synth.h). Split from synth.cpp, which plans and writes the file.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "tensor/dtype.h"

namespace colibri::synth {

uint64_t mix64(uint64_t z);
uint64_t hash_name(std::string_view s);

// splitmix64: fast, and good enough for weights nobody trains. One stream per
// (seed, tensor, row), so rows can be generated in any order on any number of
// threads and the file is the same.
class RowRng {
 public:
  RowRng(uint64_t seed, uint64_t stream, uint64_t row)
      : s_(mix64(seed ^ mix64(stream ^ mix64(row + 0x9E3779B97F4A7C15ull)))) {}
  uint64_t next() { return mix64(s_ += 0x9E3779B97F4A7C15ull); }
  void bytes(uint8_t* dst, size_t n) {
    for (size_t i = 0; i < n; i += 8) {
      uint64_t v = next();
      std::memcpy(dst + i, &v, std::min<size_t>(8, n - i));
    }
  }
  int uniform_int(int lo, int hi) { return lo + static_cast<int>(next() % static_cast<uint64_t>(hi - lo + 1)); }
  float uniform() { return static_cast<float>((next() >> 40) + 0.5) * (1.0f / 16777216.0f); }
  float gauss() {  // Box-Muller; the second value is dropped for simplicity
    float u1 = uniform(), u2 = uniform();
    return std::sqrt(-2.0f * std::log(u1)) * std::cos(6.2831853f * u2);
  }

 private:
  uint64_t s_;
};

// n values of type t whose dequantized values have standard deviation sigma.
// zero0: element 0 of the row is exactly 0 (matrices that read the normed
// residual must not see the constant channel; see synth.h).
void random_blocks(DType t, RowRng& rng, float sigma, uint8_t* dst, int64_t n, bool zero0 = false);

// The constant channel's value in every embedding row: a "massive
// activation" a few times the other coordinates' scale (they are N(0, 1)).
constexpr float kChannel = 3.0f;

// Natural routing: coordinate 0 of every token embedding is S sqrt(n_embd)
// with S = kMassive, S times the norm of the rest, as trained models' hidden
// states carry a few "massive activations" in fixed coordinates. Random
// routers read it as a per-expert bias of standard deviation ~S against noise
// of ~1 (and the layers carry it on), which is what makes the routing uneven.
constexpr float kMassive = 0.25f;

// Patches a random embedding row so element 0 holds c (see synth_blocks.cpp).
void set_channel(DType t, float c, uint8_t* dst);

}  // namespace colibri::synth
