// q6_K's 6-bit codes from its nibble and high-bit bytes, 64 at a time, for
// the AVX-512 kernels (avx512.cpp's plain kernel and avx512_packed.cpp's row
// groups, which apply it to rows or to transposed lanes alike: every step is
// byte-local within 16-bit pairs).
//
// Byte j of qa, qb and qh go together: qa = [ql 0..31 | ql 64..95], qb =
// [ql 32..63 | ql 96..127] and qh whole give
//   u[0] = qa low  | qh bits 0-1     u[1] = qb low  | qh bits 2-3
//   u[2] = qa high | qh bits 4-5     u[3] = qb high | qh bits 6-7
// (codes 0..63). Each field reaches bits 4-5 from qh & 0x33 or qh & 0xCC
// with one 16-bit shift; what else lands in the byte is in bits 0-3, which
// the nibble select overwrites.
#pragma once

#include <immintrin.h>

namespace colibri {
namespace {

inline void q6_K_fields(__m512i qa, __m512i qb, __m512i qh, __m512i (&u)[4]) {
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  // (m4 ? nibbles : high part), bit by bit.
  auto merge = [&](__m512i nib, __m512i hi) { return _mm512_ternarylogic_epi32(m4, nib, hi, 0xCA); };
  const __m512i p = _mm512_and_si512(qh, _mm512_set1_epi8(0x33));
  const __m512i q = _mm512_and_si512(qh, _mm512_set1_epi8(static_cast<char>(0xCC)));
  u[0] = merge(qa, _mm512_slli_epi16(p, 4));
  u[1] = merge(qb, _mm512_slli_epi16(q, 2));
  u[2] = merge(_mm512_srli_epi16(qa, 4), p);
  u[3] = merge(_mm512_srli_epi16(qb, 4), _mm512_srli_epi16(q, 2));
}

}  // namespace
}  // namespace colibri
