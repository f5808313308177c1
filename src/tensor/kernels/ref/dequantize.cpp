// Scalar dequantizers, one per type, with ggml's dequantize_row_* arithmetic
// (same operation order, so results are bit-identical to llama.cpp's).
#include <cstring>

#include "tensor/half.h"
#include "tensor/kernels/ref/ref.h"
#include "tensor/quant_blocks.h"

namespace colibri::ref {

void dequantize_f32(const void* src, float* dst, int64_t n) {
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}

void dequantize_f16(const void* src, float* dst, int64_t n) {
  const auto* h = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = half_to_float(h[i]);
}

void dequantize_bf16(const void* src, float* dst, int64_t n) {
  const auto* h = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_float(h[i]);
}

// x[j] = (q - 8) * d; element j in the low nibble of qs[j], j + 16 in the high.
void dequantize_q4_0(const void* src, float* dst, int64_t n) {
  const auto* x = static_cast<const block_q4_0*>(src);
  for (int64_t i = 0; i < n / kQK; ++i, dst += kQK) {
    const float d = half_to_float(x[i].d);
    for (int j = 0; j < kQK / 2; ++j) {
      dst[j] = ((x[i].qs[j] & 0x0F) - 8) * d;
      dst[j + kQK / 2] = ((x[i].qs[j] >> 4) - 8) * d;
    }
  }
}

// x[j] = q * d + m.
void dequantize_q4_1(const void* src, float* dst, int64_t n) {
  const auto* x = static_cast<const block_q4_1*>(src);
  for (int64_t i = 0; i < n / kQK; ++i, dst += kQK) {
    const float d = half_to_float(x[i].d);
    const float m = half_to_float(x[i].m);
    for (int j = 0; j < kQK / 2; ++j) {
      dst[j] = (x[i].qs[j] & 0x0F) * d + m;
      dst[j + kQK / 2] = (x[i].qs[j] >> 4) * d + m;
    }
  }
}

// x[j] = (q - 16) * d with q's fifth bit in bit j of qh.
void dequantize_q5_0(const void* src, float* dst, int64_t n) {
  const auto* x = static_cast<const block_q5_0*>(src);
  for (int64_t i = 0; i < n / kQK; ++i, dst += kQK) {
    const float d = half_to_float(x[i].d);
    uint32_t qh;
    std::memcpy(&qh, x[i].qh, 4);
    for (int j = 0; j < kQK / 2; ++j) {
      const int h0 = ((qh >> j) << 4) & 0x10;
      const int h1 = (qh >> (j + 12)) & 0x10;
      dst[j] = (((x[i].qs[j] & 0x0F) | h0) - 16) * d;
      dst[j + kQK / 2] = (((x[i].qs[j] >> 4) | h1) - 16) * d;
    }
  }
}

// x[j] = q * d + m, q in 0..31.
void dequantize_q5_1(const void* src, float* dst, int64_t n) {
  const auto* x = static_cast<const block_q5_1*>(src);
  for (int64_t i = 0; i < n / kQK; ++i, dst += kQK) {
    const float d = half_to_float(x[i].d);
    const float m = half_to_float(x[i].m);
    uint32_t qh;
    std::memcpy(&qh, x[i].qh, 4);
    for (int j = 0; j < kQK / 2; ++j) {
      const int h0 = ((qh >> j) << 4) & 0x10;
      const int h1 = (qh >> (j + 12)) & 0x10;
      dst[j] = ((x[i].qs[j] & 0x0F) | h0) * d + m;
      dst[j + kQK / 2] = ((x[i].qs[j] >> 4) | h1) * d + m;
    }
  }
}

void dequantize_q8_0(const void* src, float* dst, int64_t n) {
  const auto* x = static_cast<const block_q8_0*>(src);
  for (int64_t i = 0; i < n / kQK; ++i, dst += kQK) {
    const float d = half_to_float(x[i].d);
    for (int j = 0; j < kQK; ++j) dst[j] = x[i].qs[j] * d;
  }
}

void dequantize_q8_1(const void* src, float* dst, int64_t n) {
  const auto* x = static_cast<const block_q8_1*>(src);
  for (int64_t i = 0; i < n / kQK; ++i, dst += kQK) {
    const float d = half_to_float(x[i].d);
    for (int j = 0; j < kQK; ++j) dst[j] = x[i].qs[j] * d;
  }
}

// Each 128 elements use 32 bytes of qs: element 32 k + l (k = 0..3) is bits
// 2k..2k+1 of qs[l]; sub-block i of 16 has scale/min nibbles in scales[i].
void dequantize_q2_K(const void* src, float* dst, int64_t n) {
  const auto* x = static_cast<const block_q2_K*>(src);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float d = half_to_float(x[i].d);
    const float min = half_to_float(x[i].dmin);
    const uint8_t* q = x[i].qs;
    int is = 0;
    for (int half = 0; half < 2; ++half, q += 32) {
      for (int shift = 0; shift < 8; shift += 2) {
        for (int part = 0; part < 2; ++part) {
          const uint8_t sc = x[i].scales[is++];
          const float dl = d * (sc & 0xF);
          const float ml = min * (sc >> 4);
          for (int l = 0; l < 16; ++l)
            *dst++ = dl * static_cast<int8_t>((q[l + 16 * part] >> shift) & 3) - ml;
        }
      }
    }
  }
}

// Like q2_K, plus a high bit per element in hmask (bit k of hmask[l] for the
// k-th group of 32): a clear bit subtracts 4.
void dequantize_q3_K(const void* src, float* dst, int64_t n) {
  const auto* x = static_cast<const block_q3_K*>(src);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float d_all = half_to_float(x[i].d);
    int8_t scales[16];
    q3k_scales(x[i].scales, scales);
    const uint8_t* q = x[i].qs;
    const uint8_t* hm = x[i].hmask;
    uint8_t m = 1;
    int is = 0;
    for (int half = 0; half < 2; ++half, q += 32) {
      for (int shift = 0; shift < 8; shift += 2, m <<= 1) {
        for (int part = 0; part < 2; ++part) {
          const float dl = d_all * scales[is++];
          for (int l = 16 * part; l < 16 * part + 16; ++l)
            *dst++ = dl * (static_cast<int8_t>((q[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4));
        }
      }
    }
  }
}

// Each 64 elements use 32 bytes of qs: low nibbles are sub-block 2k, high
// nibbles sub-block 2k + 1.
void dequantize_q4_K(const void* src, float* dst, int64_t n) {
  const auto* x = static_cast<const block_q4_K*>(src);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const uint8_t* q = x[i].qs;
    const float d = half_to_float(x[i].d);
    const float min = half_to_float(x[i].dmin);
    for (int is = 0; is < 8; is += 2, q += 32) {
      uint8_t sc, m;
      k4_scale_min(is, x[i].scales, &sc, &m);
      const float d1 = d * sc, m1 = min * m;
      k4_scale_min(is + 1, x[i].scales, &sc, &m);
      const float d2 = d * sc, m2 = min * m;
      for (int l = 0; l < 32; ++l) *dst++ = d1 * (q[l] & 0xF) - m1;
      for (int l = 0; l < 32; ++l) *dst++ = d2 * (q[l] >> 4) - m2;
    }
  }
}

// As q4_K; the fifth bit of sub-block s's element l is bit s of qh[l].
void dequantize_q5_K(const void* src, float* dst, int64_t n) {
  const auto* x = static_cast<const block_q5_K*>(src);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const uint8_t* ql = x[i].qs;
    const uint8_t* qh = x[i].qh;
    const float d = half_to_float(x[i].d);
    const float min = half_to_float(x[i].dmin);
    uint8_t u1 = 1, u2 = 2;
    for (int is = 0; is < 8; is += 2, ql += 32, u1 <<= 2, u2 <<= 2) {
      uint8_t sc, m;
      k4_scale_min(is, x[i].scales, &sc, &m);
      const float d1 = d * sc, m1 = min * m;
      k4_scale_min(is + 1, x[i].scales, &sc, &m);
      const float d2 = d * sc, m2 = min * m;
      for (int l = 0; l < 32; ++l) *dst++ = d1 * ((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
      for (int l = 0; l < 32; ++l) *dst++ = d2 * ((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
    }
  }
}

// Each 128 elements use 64 bytes of ql and 32 of qh: element 32 k + l takes
// its low nibble from ql[l + 32 (k & 1)] (low for k < 2, high otherwise) and
// its two high bits from bits 2k..2k+1 of qh[l].
void dequantize_q6_K(const void* src, float* dst, int64_t n) {
  const auto* x = static_cast<const block_q6_K*>(src);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float d = half_to_float(x[i].d);
    const uint8_t* ql = x[i].ql;
    const uint8_t* qh = x[i].qh;
    const int8_t* sc = x[i].scales;
    for (int half = 0; half < 2; ++half, dst += 128, ql += 64, qh += 32, sc += 8) {
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = static_cast<int8_t>((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = static_cast<int8_t>((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = static_cast<int8_t>((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = static_cast<int8_t>((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        dst[l + 0] = d * sc[is + 0] * q1;
        dst[l + 32] = d * sc[is + 2] * q2;
        dst[l + 64] = d * sc[is + 4] * q3;
        dst[l + 96] = d * sc[is + 6] * q4;
      }
    }
  }
}

// x[j] = kMxfp4Values[code] * 2^(e - 128): both factors and the product are
// exact in F32 (the product overflows to infinity only for e = 255 with
// |code value| >= 2).
void dequantize_mxfp4(const void* src, float* dst, int64_t n) {
  const auto* x = static_cast<const block_mxfp4*>(src);
  for (int64_t i = 0; i < n / kQK; ++i, dst += kQK) {
    const float d = e8m0_to_float_half(x[i].e);
    for (int j = 0; j < kQK / 2; ++j) {
      dst[j] = kMxfp4Values[x[i].qs[j] & 0x0F] * d;
      dst[j + kQK / 2] = kMxfp4Values[x[i].qs[j] >> 4] * d;
    }
  }
}

void dequantize_iq4_nl(const void* src, float* dst, int64_t n) {
  const auto* x = static_cast<const block_iq4_nl*>(src);
  for (int64_t i = 0; i < n / kQK; ++i, dst += kQK) {
    const float d = half_to_float(x[i].d);
    for (int j = 0; j < kQK / 2; ++j) {
      dst[j] = d * kIq4nlValues[x[i].qs[j] & 0x0F];
      dst[j + kQK / 2] = d * kIq4nlValues[x[i].qs[j] >> 4];
    }
  }
}

void dequantize_iq4_xs(const void* src, float* dst, int64_t n) {
  const auto* x = static_cast<const block_iq4_xs*>(src);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float d = half_to_float(x[i].d);
    for (int ib = 0; ib < kQK_K / kQK; ++ib, dst += kQK) {
      const float dl = d * static_cast<float>(iq4_xs_scale(x[i], ib));
      const uint8_t* qs = x[i].qs + 16 * ib;
      for (int j = 0; j < kQK / 2; ++j) {
        dst[j] = dl * kIq4nlValues[qs[j] & 0x0F];
        dst[j + kQK / 2] = dl * kIq4nlValues[qs[j] >> 4];
      }
    }
  }
}

void dequantize_q8_K(const void* src, float* dst, int64_t n) {
  const auto* x = static_cast<const block_q8_K*>(src);
  for (int64_t i = 0; i < n / kQK_K; ++i)
    for (int j = 0; j < kQK_K; ++j) *dst++ = x[i].d * x[i].qs[j];
}

}  // namespace colibri::ref
