// IEEE binary16 and bfloat16 <-> binary32, scalar and exact.
//
// fp32 -> fp16/bf16 rounds to nearest, ties to even (what F16C's vcvtps2ph and
// ggml's GGML_FP32_TO_FP16/BF16 do); NaN stays NaN (quiet), overflow goes to
// infinity, and fp16 subnormals are produced and read exactly.
#pragma once

#include <cstdint>
#include <cstring>

namespace colibri {

inline uint32_t f32_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float f32_from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1F;
  const uint32_t mant = h & 0x3FF;
  if (exp == 0) {
    // Subnormal (or zero): mant * 2^-24, exact in binary32.
    float v = static_cast<float>(mant) * 0x1p-24f;
    return sign ? -v : v;
  }
  if (exp == 31) return f32_from_bits(sign | 0x7F800000 | (mant << 13));
  return f32_from_bits(sign | ((exp + 112) << 23) | (mant << 13));
}

inline uint16_t float_to_half(float f) {
  const uint32_t x = f32_bits(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  const uint32_t u = x & 0x7FFFFFFF;
  if (u > 0x7F800000) return sign | 0x7E00 | ((u >> 13) & 0x3FF);  // NaN, kept quiet
  // 65520 = 65504 + half an ulp: ties to even round up to infinity.
  if (u >= 0x477FF000) return sign | 0x7C00;
  if (u < 0x38800000) {
    // Below 2^-14: an fp16 subnormal, in units of 2^-24.
    const uint32_t exp = u >> 23;
    if (exp < 102) return sign;  // below 2^-25: rounds to zero
    const uint32_t mant = (u & 0x7FFFFF) | 0x800000;
    const uint32_t shift = 126 - exp;  // 14..24
    uint32_t r = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1))) ++r;
    return sign | static_cast<uint16_t>(r);
  }
  // Normal: rebias the exponent, round the 13 dropped bits (a carry into the
  // exponent is the right answer).
  uint32_t h = ((u - (112u << 23)) >> 13);
  const uint32_t rem = u & 0x1FFF;
  if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) ++h;
  return sign | static_cast<uint16_t>(h);
}

inline float bf16_to_float(uint16_t h) { return f32_from_bits(static_cast<uint32_t>(h) << 16); }

inline uint16_t float_to_bf16(float f) {
  const uint32_t u = f32_bits(f);
  if ((u & 0x7FFFFFFF) > 0x7F800000) return static_cast<uint16_t>((u >> 16) | 0x40);  // quiet NaN
  return static_cast<uint16_t>((u + 0x7FFF + ((u >> 16) & 1)) >> 16);
}

}  // namespace colibri
