// Scalar dot kernels: the per-block integer sums and scale products of ggml's
// ggml_vec_dot_*_generic, so results match llama.cpp within float rounding.
#include <cstring>

#include "tensor/half.h"
#include "tensor/kernels/ref/ref.h"
#include "tensor/quant_blocks.h"

namespace colibri::ref {

// The float dots accumulate F32 products in double, as ggml's scalar path does.
float dot_f32(const void* w, const void* x, int64_t n) {
  const auto* a = static_cast<const float*>(w);
  const auto* b = static_cast<const float*>(x);
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(a[i] * b[i]);
  return static_cast<float>(s);
}

float dot_f16(const void* w, const void* x, int64_t n) {
  const auto* a = static_cast<const uint16_t*>(w);
  const auto* b = static_cast<const uint16_t*>(x);
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(half_to_float(a[i]) * half_to_float(b[i]));
  return static_cast<float>(s);
}

float dot_bf16(const void* w, const void* x, int64_t n) {
  const auto* a = static_cast<const uint16_t*>(w);
  const auto* b = static_cast<const uint16_t*>(x);
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(bf16_to_float(a[i]) * bf16_to_float(b[i]));
  return static_cast<float>(s);
}

// sum_b d_w d_x sum_j (q_j - 8) x_j
float dot_q4_0(const void* w, const void* xv, int64_t n) {
  const auto* x = static_cast<const block_q4_0*>(w);
  const auto* y = static_cast<const block_q8_0*>(xv);
  float sumf = 0;
  for (int64_t ib = 0; ib < n / kQK; ++ib) {
    int sumi = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      sumi += ((x[ib].qs[j] & 0x0F) - 8) * y[ib].qs[j];
      sumi += ((x[ib].qs[j] >> 4) - 8) * y[ib].qs[j + kQK / 2];
    }
    sumf += sumi * half_to_float(x[ib].d) * half_to_float(y[ib].d);
  }
  return sumf;
}

// sum_b d_w d_x sum_j q_j x_j + m_w s_x
float dot_q4_1(const void* w, const void* xv, int64_t n) {
  const auto* x = static_cast<const block_q4_1*>(w);
  const auto* y = static_cast<const block_q8_1*>(xv);
  float sumf = 0;
  for (int64_t ib = 0; ib < n / kQK; ++ib) {
    int sumi = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      sumi += (x[ib].qs[j] & 0x0F) * y[ib].qs[j];
      sumi += (x[ib].qs[j] >> 4) * y[ib].qs[j + kQK / 2];
    }
    sumf += (half_to_float(x[ib].d) * half_to_float(y[ib].d)) * sumi +
            half_to_float(x[ib].m) * half_to_float(y[ib].s);
  }
  return sumf;
}

float dot_q5_0(const void* w, const void* xv, int64_t n) {
  const auto* x = static_cast<const block_q5_0*>(w);
  const auto* y = static_cast<const block_q8_0*>(xv);
  float sumf = 0;
  for (int64_t ib = 0; ib < n / kQK; ++ib) {
    uint32_t qh;
    std::memcpy(&qh, x[ib].qh, 4);
    int sumi = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      const int h0 = ((qh >> j) << 4) & 0x10;
      const int h1 = (qh >> (j + 12)) & 0x10;
      sumi += (((x[ib].qs[j] & 0x0F) | h0) - 16) * y[ib].qs[j];
      sumi += (((x[ib].qs[j] >> 4) | h1) - 16) * y[ib].qs[j + kQK / 2];
    }
    sumf += (half_to_float(x[ib].d) * half_to_float(y[ib].d)) * sumi;
  }
  return sumf;
}

float dot_q5_1(const void* w, const void* xv, int64_t n) {
  const auto* x = static_cast<const block_q5_1*>(w);
  const auto* y = static_cast<const block_q8_1*>(xv);
  float sumf = 0;
  for (int64_t ib = 0; ib < n / kQK; ++ib) {
    uint32_t qh;
    std::memcpy(&qh, x[ib].qh, 4);
    int sumi = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      const int h0 = ((qh >> j) << 4) & 0x10;
      const int h1 = (qh >> (j + 12)) & 0x10;
      sumi += ((x[ib].qs[j] & 0x0F) | h0) * y[ib].qs[j];
      sumi += ((x[ib].qs[j] >> 4) | h1) * y[ib].qs[j + kQK / 2];
    }
    sumf += (half_to_float(x[ib].d) * half_to_float(y[ib].d)) * sumi +
            half_to_float(x[ib].m) * half_to_float(y[ib].s);
  }
  return sumf;
}

float dot_q8_0(const void* w, const void* xv, int64_t n) {
  const auto* x = static_cast<const block_q8_0*>(w);
  const auto* y = static_cast<const block_q8_0*>(xv);
  float sumf = 0;
  for (int64_t ib = 0; ib < n / kQK; ++ib) {
    int sumi = 0;
    for (int j = 0; j < kQK; ++j) sumi += x[ib].qs[j] * y[ib].qs[j];
    sumf += sumi * (half_to_float(x[ib].d) * half_to_float(y[ib].d));
  }
  return sumf;
}

// sum_b (d_x 2^(e_b - 128)) sum_j kMxfp4Values[code_j] x_j, in ggml's order:
// the two scales multiplied first, then by the block's exact integer sum.
// With e = 255 the scale product may be infinite (and 0 * inf a NaN), as in
// ggml; nothing here is undefined.
float dot_mxfp4(const void* w, const void* xv, int64_t n) {
  const auto* x = static_cast<const block_mxfp4*>(w);
  const auto* y = static_cast<const block_q8_0*>(xv);
  float sumf = 0;
  for (int64_t ib = 0; ib < n / kQK; ++ib) {
    int sumi = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      sumi += kMxfp4Values[x[ib].qs[j] & 0x0F] * y[ib].qs[j];
      sumi += kMxfp4Values[x[ib].qs[j] >> 4] * y[ib].qs[j + kQK / 2];
    }
    const float d = half_to_float(y[ib].d) * e8m0_to_float_half(x[ib].e);
    sumf += d * static_cast<float>(sumi);
  }
  return sumf;
}

// sum_b d_w d_x sum_j kIq4nlValues[q_j] x_j
float dot_iq4_nl(const void* w, const void* xv, int64_t n) {
  const auto* x = static_cast<const block_iq4_nl*>(w);
  const auto* y = static_cast<const block_q8_0*>(xv);
  float sumf = 0;
  for (int64_t ib = 0; ib < n / kQK; ++ib) {
    int sumi = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      sumi += kIq4nlValues[x[ib].qs[j] & 0x0F] * y[ib].qs[j];
      sumi += kIq4nlValues[x[ib].qs[j] >> 4] * y[ib].qs[j + kQK / 2];
    }
    sumf += half_to_float(x[ib].d) * half_to_float(y[ib].d) * static_cast<float>(sumi);
  }
  return sumf;
}

// sum_b d_w d_x sum_i (ls_i - 32) sum_j kIq4nlValues[q_j] x_j, one float
// term per sub-block of 32 as ggml's generic kernel adds them.
float dot_iq4_xs(const void* w, const void* xv, int64_t n) {
  const auto* x = static_cast<const block_iq4_xs*>(w);
  const auto* y = static_cast<const block_q8_K*>(xv);
  float sumf = 0;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float d = half_to_float(x[i].d) * y[i].d;
    for (int ib = 0; ib < kQK_K / kQK; ++ib) {
      const uint8_t* qs = x[i].qs + 16 * ib;
      const int8_t* q8 = y[i].qs + kQK * ib;
      int sumi = 0;
      for (int j = 0; j < kQK / 2; ++j) {
        sumi += kIq4nlValues[qs[j] & 0x0F] * q8[j];
        sumi += kIq4nlValues[qs[j] >> 4] * q8[j + kQK / 2];
      }
      sumf += d * static_cast<float>(iq4_xs_scale(x[i], ib)) * static_cast<float>(sumi);
    }
  }
  return sumf;
}

// sum_b d_x (d_w sum_i sc_i sum_j q_j x_j - dmin_w sum_i m_i bsum_i)
float dot_q2_K(const void* w, const void* xv, int64_t n) {
  const auto* x = static_cast<const block_q2_K*>(w);
  const auto* y = static_cast<const block_q8_K*>(xv);
  float sumf = 0;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const uint8_t* q2 = x[i].qs;
    const int8_t* q8 = y[i].qs;
    const uint8_t* sc = x[i].scales;
    int summs = 0;
    for (int j = 0; j < 16; ++j) summs += y[i].bsums[j] * (sc[j] >> 4);
    const float dall = y[i].d * half_to_float(x[i].d);
    const float dmin = y[i].d * half_to_float(x[i].dmin);
    int isum = 0, is = 0;
    for (int k = 0; k < 2; ++k, q2 += 32) {
      for (int shift = 0; shift < 8; shift += 2, q8 += 32) {
        int d = sc[is++] & 0xF;
        int isuml = 0;
        for (int l = 0; l < 16; ++l) isuml += q8[l] * ((q2[l] >> shift) & 3);
        isum += d * isuml;
        d = sc[is++] & 0xF;
        isuml = 0;
        for (int l = 16; l < 32; ++l) isuml += q8[l] * ((q2[l] >> shift) & 3);
        isum += d * isuml;
      }
    }
    sumf += dall * isum - dmin * summs;
  }
  return sumf;
}

// The K-quant dots below follow ggml's generic order: per super-block, eight
// int32 lane sums of scale * q * x (lane = element index mod 8), scaled by
// d_w d_x into eight float partial sums added at the end.
namespace {

float finish_lanes(const float sums[8], float sumf) {
  for (int l = 0; l < 8; ++l) sumf += sums[l];
  return sumf;
}

// aux32[l] += scale * q[l] * x[l] over groups of 8 elements.
void lanes_add(int32_t aux32[8], const int8_t* a, const int8_t* q8, int scale, int n_elems) {
  for (int g = 0; g < n_elems; g += 8)
    for (int l = 0; l < 8; ++l) aux32[l] += scale * (q8[g + l] * a[g + l]);
}

}  // namespace

float dot_q3_K(const void* w, const void* xv, int64_t n) {
  const auto* x = static_cast<const block_q3_K*>(w);
  const auto* y = static_cast<const block_q8_K*>(xv);
  float sums[8] = {};
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int8_t a[kQK_K];
    const uint8_t* q3 = x[i].qs;
    const uint8_t* hm = x[i].hmask;
    int8_t* p = a;
    uint8_t m = 1;
    for (int half = 0; half < 2; ++half, q3 += 32)
      for (int shift = 0; shift < 8; shift += 2, m <<= 1, p += 32)
        for (int l = 0; l < 32; ++l)
          p[l] = static_cast<int8_t>(((q3[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4));
    int8_t scales[16];
    q3k_scales(x[i].scales, scales);
    int32_t aux32[8] = {};
    for (int j = 0; j < 16; ++j) lanes_add(aux32, a + 16 * j, y[i].qs + 16 * j, scales[j], 16);
    const float d = half_to_float(x[i].d) * y[i].d;
    for (int l = 0; l < 8; ++l) sums[l] += d * aux32[l];
  }
  return finish_lanes(sums, 0.0f);
}

// Shared by q4_K and q5_K once the 4/5-bit values are unpacked into a.
static float dot_k4_lanes(const int8_t* a, const uint8_t* packed_scales, uint16_t d_w,
                          uint16_t dmin_w, const block_q8_K& y, float sums[8]) {
  int32_t aux32[8] = {};
  int sumi = 0;
  uint8_t sc[8], mn[8];
  for (int j = 0; j < 8; ++j) k4_scale_min(j, packed_scales, &sc[j], &mn[j]);
  for (int j = 0; j < 16; ++j) sumi += y.bsums[j] * mn[j / 2];
  for (int j = 0; j < 8; ++j) lanes_add(aux32, a + 32 * j, y.qs + 32 * j, sc[j], 32);
  const float d = half_to_float(d_w) * y.d;
  for (int l = 0; l < 8; ++l) sums[l] += d * aux32[l];
  const float dmin = half_to_float(dmin_w) * y.d;
  return dmin * sumi;
}

float dot_q4_K(const void* w, const void* xv, int64_t n) {
  const auto* x = static_cast<const block_q4_K*>(w);
  const auto* y = static_cast<const block_q8_K*>(xv);
  float sums[8] = {};
  float sumf = 0;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int8_t a[kQK_K];
    const uint8_t* q4 = x[i].qs;
    for (int j = 0; j < 4; ++j, q4 += 32)
      for (int l = 0; l < 32; ++l) {
        a[64 * j + l] = static_cast<int8_t>(q4[l] & 0xF);
        a[64 * j + 32 + l] = static_cast<int8_t>(q4[l] >> 4);
      }
    sumf -= dot_k4_lanes(a, x[i].scales, x[i].d, x[i].dmin, y[i], sums);
  }
  return finish_lanes(sums, sumf);
}

float dot_q5_K(const void* w, const void* xv, int64_t n) {
  const auto* x = static_cast<const block_q5_K*>(w);
  const auto* y = static_cast<const block_q8_K*>(xv);
  float sums[8] = {};
  float sumf = 0;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int8_t a[kQK_K];
    const uint8_t* q4 = x[i].qs;
    const uint8_t* hm = x[i].qh;
    uint8_t m = 1;
    for (int j = 0; j < 4; ++j, q4 += 32, m <<= 2)
      for (int l = 0; l < 32; ++l) {
        a[64 * j + l] = static_cast<int8_t>((q4[l] & 0xF) + (hm[l] & m ? 16 : 0));
        a[64 * j + 32 + l] = static_cast<int8_t>((q4[l] >> 4) + (hm[l] & (m << 1) ? 16 : 0));
      }
    sumf -= dot_k4_lanes(a, x[i].scales, x[i].d, x[i].dmin, y[i], sums);
  }
  return finish_lanes(sums, sumf);
}

float dot_q6_K(const void* w, const void* xv, int64_t n) {
  const auto* x = static_cast<const block_q6_K*>(w);
  const auto* y = static_cast<const block_q8_K*>(xv);
  float sums[8] = {};
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int8_t a[kQK_K];
    const uint8_t* ql = x[i].ql;
    const uint8_t* qh = x[i].qh;
    for (int half = 0; half < 2; ++half, ql += 64, qh += 32) {
      int8_t* p = a + 128 * half;
      for (int l = 0; l < 32; ++l) {
        p[l + 0] = static_cast<int8_t>(((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32);
        p[l + 32] = static_cast<int8_t>(((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
        p[l + 64] = static_cast<int8_t>(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
        p[l + 96] = static_cast<int8_t>(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
      }
    }
    int32_t aux32[8] = {};
    for (int j = 0; j < 16; ++j) lanes_add(aux32, a + 16 * j, y[i].qs + 16 * j, x[i].scales[j], 16);
    const float d = half_to_float(x[i].d) * y[i].d;
    for (int l = 0; l < 8; ++l) sums[l] += d * aux32[l];
  }
  return finish_lanes(sums, 0.0f);
}

}  // namespace colibri::ref
