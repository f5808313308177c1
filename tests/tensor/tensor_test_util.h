// Shared helpers for the tensor tests: random weight rows of every type with
// controlled scales, and F64 oracles built from the dequantized values.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "tensor/dtype.h"
#include "tensor/half.h"
#include "tensor/ops.h"
#include "tensor/quant_blocks.h"

namespace colibri::testing {

inline constexpr DType kWeightTypes[] = {DType::F32,  DType::F16,   DType::BF16,   DType::Q4_0,
                                         DType::Q4_1, DType::Q5_0,  DType::Q5_1,   DType::Q8_0,
                                         DType::Q2_K, DType::Q3_K,  DType::Q4_K,   DType::Q5_K,
                                         DType::Q6_K, DType::MXFP4, DType::IQ4_NL, DType::IQ4_XS,
                                         DType::IQ2_XXS, DType::IQ2_XS, DType::IQ2_S, DType::IQ3_XXS,
                                         DType::IQ3_S, DType::IQ1_S, DType::IQ1_M};

// How the block scales of random weights are chosen.
enum class Scales { kTypical, kLarge };

inline float random_scale(std::mt19937& rng, Scales s) {
  std::uniform_real_distribution<float> u(0.5f, 1.0f);
  // kLarge: near the top of fp16's range but such that products of a few
  // thousand terms stay finite in F32.
  return s == Scales::kLarge ? u(rng) * 30000.0f : u(rng) * 0.02f;
}

inline void set_half(uint16_t* h, float v) { *h = float_to_half(v); }

// n elements (a multiple of the block size) of type t: random quant bits, with
// every fp16 scale/min replaced by a finite random value.
inline std::vector<uint8_t> random_weights(DType t, int64_t n, std::mt19937& rng,
                                           Scales s = Scales::kTypical, bool all_max = false) {
  std::vector<uint8_t> buf(row_bytes(t, n));
  std::uniform_int_distribution<int> byte(0, 255);
  for (auto& b : buf) b = all_max ? 0xFF : static_cast<uint8_t>(byte(rng));
  const int64_t nb = n / dtype_info(t).block_size;
  std::normal_distribution<float> g(0.0f, 1.0f);
  auto sc = [&] { return random_scale(rng, s); };
  auto sgn = [&] { return byte(rng) & 1 ? 1.0f : -1.0f; };
  switch (t) {
    case DType::F32: {
      auto* p = reinterpret_cast<float*>(buf.data());
      for (int64_t i = 0; i < n; ++i) p[i] = g(rng) * (s == Scales::kLarge ? 1000.0f : 1.0f);
      break;
    }
    case DType::F16: {
      auto* p = reinterpret_cast<uint16_t*>(buf.data());
      for (int64_t i = 0; i < n; ++i) p[i] = float_to_half(g(rng) * (s == Scales::kLarge ? 1000.0f : 1.0f));
      break;
    }
    case DType::BF16: {
      auto* p = reinterpret_cast<uint16_t*>(buf.data());
      for (int64_t i = 0; i < n; ++i) p[i] = float_to_bf16(g(rng) * (s == Scales::kLarge ? 1e6f : 1.0f));
      break;
    }
    case DType::Q4_0:
      for (int64_t i = 0; i < nb; ++i) set_half(&reinterpret_cast<block_q4_0*>(buf.data())[i].d, sgn() * sc());
      break;
    case DType::Q5_0:
      for (int64_t i = 0; i < nb; ++i) set_half(&reinterpret_cast<block_q5_0*>(buf.data())[i].d, sgn() * sc());
      break;
    case DType::Q8_0:
      for (int64_t i = 0; i < nb; ++i) set_half(&reinterpret_cast<block_q8_0*>(buf.data())[i].d, sgn() * sc());
      break;
    case DType::Q4_1:
      for (int64_t i = 0; i < nb; ++i) {
        auto& b = reinterpret_cast<block_q4_1*>(buf.data())[i];
        set_half(&b.d, sc() / 32);
        set_half(&b.m, -8 * sc() / 32);
      }
      break;
    case DType::Q5_1:
      for (int64_t i = 0; i < nb; ++i) {
        auto& b = reinterpret_cast<block_q5_1*>(buf.data())[i];
        set_half(&b.d, sc() / 32);
        set_half(&b.m, -16 * sc() / 32);
      }
      break;
    case DType::Q2_K:
      for (int64_t i = 0; i < nb; ++i) {
        auto& b = reinterpret_cast<block_q2_K*>(buf.data())[i];
        set_half(&b.d, sc());
        set_half(&b.dmin, sc());
      }
      break;
    case DType::Q3_K:
      for (int64_t i = 0; i < nb; ++i) set_half(&reinterpret_cast<block_q3_K*>(buf.data())[i].d, sgn() * sc());
      break;
    case DType::Q4_K:
      for (int64_t i = 0; i < nb; ++i) {
        auto& b = reinterpret_cast<block_q4_K*>(buf.data())[i];
        set_half(&b.d, sc() / 16);
        set_half(&b.dmin, sc() / 16);
      }
      break;
    case DType::Q5_K:
      for (int64_t i = 0; i < nb; ++i) {
        auto& b = reinterpret_cast<block_q5_K*>(buf.data())[i];
        set_half(&b.d, sc() / 16);
        set_half(&b.dmin, sc() / 16);
      }
      break;
    case DType::Q6_K:
      for (int64_t i = 0; i < nb; ++i) set_half(&reinterpret_cast<block_q6_K*>(buf.data())[i].d, sgn() * sc() / 16);
      break;
    case DType::MXFP4:
      // Block scales 2^-10..2^-6 (typical) or 2^5..2^9 (large: values up to
      // 12 * 2^9, whose products with large activations stay finite).
      for (int64_t i = 0; i < nb; ++i)
        reinterpret_cast<block_mxfp4*>(buf.data())[i].e =
            static_cast<uint8_t>((s == Scales::kLarge ? 133 : 118) + byte(rng) % 5);
      break;
    case DType::IQ4_NL:
      for (int64_t i = 0; i < nb; ++i)
        set_half(&reinterpret_cast<block_iq4_nl*>(buf.data())[i].d, sgn() * sc() / 8);
      break;
    case DType::IQ4_XS:  // values up to 127 x 32 times d
      for (int64_t i = 0; i < nb; ++i)
        set_half(&reinterpret_cast<block_iq4_xs*>(buf.data())[i].d, sgn() * sc() / 256);
      break;
    // The codebook types: largest values 43 x 31 / 8 (IQ2), 62 x 31 / 4 and
    // 15 x 31 (IQ3), 1.125 x 15 (IQ1) times d.
    case DType::IQ2_XXS:
      for (int64_t i = 0; i < nb; ++i) set_half(&reinterpret_cast<block_iq2_xxs*>(buf.data())[i].d, sgn() * sc() / 128);
      break;
    case DType::IQ2_XS:
      for (int64_t i = 0; i < nb; ++i) set_half(&reinterpret_cast<block_iq2_xs*>(buf.data())[i].d, sgn() * sc() / 128);
      break;
    case DType::IQ2_S:
      for (int64_t i = 0; i < nb; ++i) set_half(&reinterpret_cast<block_iq2_s*>(buf.data())[i].d, sgn() * sc() / 128);
      break;
    case DType::IQ3_XXS:
      for (int64_t i = 0; i < nb; ++i) set_half(&reinterpret_cast<block_iq3_xxs*>(buf.data())[i].d, sgn() * sc() / 256);
      break;
    case DType::IQ3_S:
      for (int64_t i = 0; i < nb; ++i) set_half(&reinterpret_cast<block_iq3_s*>(buf.data())[i].d, sgn() * sc() / 256);
      break;
    case DType::IQ1_S:
      for (int64_t i = 0; i < nb; ++i) set_half(&reinterpret_cast<block_iq1_s*>(buf.data())[i].d, sgn() * sc() / 16);
      break;
    case DType::IQ1_M:  // d's 16 bits in the top nibbles of the four scale words
      for (int64_t i = 0; i < nb; ++i) {
        auto& b = reinterpret_cast<block_iq1_m*>(buf.data())[i];
        const uint16_t h = float_to_half(sgn() * sc() / 16);
        for (int k = 0; k < 4; ++k)
          b.scales[2 * k + 1] = static_cast<uint8_t>((b.scales[2 * k + 1] & 0x0F) | (((h >> (4 * k)) & 0xF) << 4));
      }
      break;
    default:
      break;
  }
  return buf;
}

inline std::vector<float> random_activations(int64_t n, std::mt19937& rng, float scale = 1.0f) {
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) v = g(rng) * scale;
  return x;
}

inline std::vector<float> dequantized(DType t, const void* src, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  dequantize_row(t, src, out.data(), n);
  return out;
}

// The F64 dot of the dequantized weights and dequantized activations, the sum
// of the terms' magnitudes (for a rounding bound), and for q8_1 the exact
// effect of its s field being fp16(d * sum q) where the oracle has d * sum q.
struct Oracle {
  double value = 0;
  double abs_sum = 0;
  double s_rounding = 0;
  // A kernel's F32 result may differ from value by float rounding only.
  double tolerance(double rel = 2e-5) const { return rel * abs_sum + 1.01 * s_rounding + 1e-30; }
};

inline Oracle oracle_dot(DType wt, const void* w, DType at, const void* xq, int64_t n) {
  const std::vector<float> a = dequantized(wt, w, n);
  const std::vector<float> b = dequantized(at, xq, n);
  Oracle o;
  for (int64_t i = 0; i < n; ++i) {
    o.value += static_cast<double>(a[i]) * b[i];
    o.abs_sum += std::fabs(static_cast<double>(a[i]) * b[i]);
  }
  if (at == DType::Q8_1) {
    const auto* xb = static_cast<const block_q8_1*>(xq);
    for (int64_t i = 0; i < n / kQK; ++i) {
      const float m = wt == DType::Q4_1 ? half_to_float(static_cast<const block_q4_1*>(w)[i].m)
                                        : half_to_float(static_cast<const block_q5_1*>(w)[i].m);
      int sum = 0;
      for (int j = 0; j < kQK; ++j) sum += xb[i].qs[j];
      const double exact_s = static_cast<double>(half_to_float(xb[i].d)) * sum;
      o.s_rounding += std::fabs(m * (half_to_float(xb[i].s) - exact_s));
      o.abs_sum += std::fabs(m * half_to_float(xb[i].s));
    }
  }
  return o;
}

}  // namespace colibri::testing
