// The codebook types (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M):
// dequantization in ggml's float expressions (dequantize_row_iq*), so the
// values are llama.cpp's bit for bit, and dots against Q8_K with ggml's
// integer sums and scale products (ggml_vec_dot_iq*_q8_K_generic).
//
// Each type's group decoder yields a group's signed point values (IQ2, IQ3)
// or its point (IQ1) and its 32-bit word of fields; both kernels of a type
// read the block through it.
#include <cstring>

#include "tensor/half.h"
#include "tensor/iq_grids.h"
#include "tensor/kernels/ref/ref.h"
#include "tensor/quant_blocks.h"

namespace colibri::ref {

namespace {

// The n bytes of a point with the signs of sign byte s applied (bit j: value
// j negative).
template <int N>
void signed_point(const void* point, uint8_t s, int8_t* out) {
  uint8_t v[N];
  std::memcpy(v, point, N);
  for (int j = 0; j < N; ++j) out[j] = static_cast<int8_t>((s >> j) & 1 ? -v[j] : v[j]);
}

uint32_t word(const void* p) {
  uint32_t w;
  std::memcpy(&w, p, 4);
  return w;
}

// Sub-block ib (32 weights) of an IQ2_XXS block as signed values; returns its
// scale field.
int iq2_xxs_sub(const block_iq2_xxs& b, int ib, int8_t* q) {
  const uint32_t idx = word(b.qs + 4 * ib), sg = word(b.qs + 4 * ib + 2);
  for (int l = 0; l < 4; ++l)
    signed_point<8>(&iq_grids().iq2xxs[(idx >> (8 * l)) & 255], iq2_signs(sg >> (7 * l)),
                    q + 8 * l);
  return static_cast<int>(sg >> 28);
}

// Group l (0..3) of sub-block ib of IQ2_XS and IQ2_S.
void iq2_xs_group(const block_iq2_xs& b, int ib, int l, int8_t* q) {
  const uint16_t v = b.qs[4 * ib + l];
  signed_point<8>(&iq_grids().iq2xs[v & 511], iq2_signs(v >> 9), q);
}
void iq2_s_group(const block_iq2_s& b, int ib, int l, int8_t* q) {
  const int idx = b.qs[4 * ib + l] | ((b.qh[ib] << (8 - 2 * l)) & 0x300);
  signed_point<8>(&iq_grids().iq2s[idx], b.qs[kQK_K / 8 + 4 * ib + l], q);
}

int iq3_xxs_sub(const block_iq3_xxs& b, int ib, int8_t* q) {
  const uint8_t* qs = b.qs + 8 * ib;
  const uint32_t sg = word(b.qs + kQK_K / 4 + 4 * ib);
  for (int l = 0; l < 4; ++l) {
    const uint8_t s = iq2_signs(sg >> (7 * l));
    signed_point<4>(&iq_grids().iq3xxs[qs[2 * l]], s, q + 8 * l);
    signed_point<4>(&iq_grids().iq3xxs[qs[2 * l + 1]], static_cast<uint8_t>(s >> 4), q + 8 * l + 4);
  }
  return static_cast<int>(sg >> 28);
}

void iq3_s_sub(const block_iq3_s& b, int ib, int8_t* q) {
  const uint8_t* qs = b.qs + 8 * ib;
  const int qh = b.qh[ib];
  for (int l = 0; l < 4; ++l) {
    const uint8_t s = b.signs[4 * ib + l];
    signed_point<4>(&iq_grids().iq3s[qs[2 * l] | ((qh << (8 - 2 * l)) & 256)], s, q + 8 * l);
    signed_point<4>(&iq_grids().iq3s[qs[2 * l + 1] | ((qh << (7 - 2 * l)) & 256)],
                    static_cast<uint8_t>(s >> 4), q + 8 * l + 4);
  }
}
int iq3_s_scale(const block_iq3_s& b, int ib) {
  return (b.scales[ib / 2] >> (4 * (ib % 2))) & 0xF;
}

// IQ1 points as signed bytes.
const int8_t* iq1_point(int idx) {
  return reinterpret_cast<const int8_t*>(&iq_grids().iq1s[idx]);
}
int iq1_s_index(const block_iq1_s& b, int ib, int l) {
  return b.qs[4 * ib + l] | (((b.qh[ib] >> (3 * l)) & 7) << 8);
}
int iq1_m_index(const block_iq1_m& b, int ib, int l) {
  return b.qs[4 * ib + l] | ((b.qh[2 * ib + l / 2] << (8 - 4 * (l % 2))) & 0x700);
}
bool iq1_m_minus(const block_iq1_m& b, int ib, int l) {
  return (b.qh[2 * ib + l / 2] >> (3 + 4 * (l % 2))) & 1;
}
int iq1_m_scale(const uint16_t sc[4], int ib, int half) {
  return (sc[ib / 2] >> (6 * (ib % 2) + 3 * half)) & 7;
}

int dot8(const int8_t* a, const int8_t* b) {
  int s = 0;
  for (int j = 0; j < 8; ++j) s += a[j] * b[j];
  return s;
}

}  // namespace

namespace {

// IQ2_XXS and IQ3_XXS: a scale field per sub-block; db = d (0.5 + ls) c, c
// 1/4 (IQ2_XXS) or 1/2 (IQ3_XXS), as ggml writes it.
template <typename Block, int (*Sub)(const Block&, int, int8_t*)>
void dequantize_xxs(const void* src, float* dst, int64_t n, float c) {
  const auto* x = static_cast<const Block*>(src);
  int8_t q[kQK];
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float d = half_to_float(x[i].d);
    for (int ib = 0; ib < kQK_K / kQK; ++ib, dst += kQK) {
      const float db = d * (0.5f + static_cast<float>(Sub(x[i], ib, q))) * c;
      for (int j = 0; j < kQK; ++j) dst[j] = db * static_cast<float>(q[j]);
    }
  }
}

// IQ2_XS and IQ2_S: a scale field per 16.
template <typename Block, void (*Group)(const Block&, int, int, int8_t*)>
void dequantize_scaled16(const void* src, float* dst, int64_t n) {
  const auto* x = static_cast<const Block*>(src);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float d = half_to_float(x[i].d);
    for (int ib = 0; ib < kQK_K / kQK; ++ib) {
      for (int l = 0; l < 4; ++l, dst += 8) {
        const float db =
            d * (0.5f + static_cast<float>((x[i].scales[ib] >> (4 * (l / 2))) & 0xF)) * 0.25f;
        int8_t q[8];
        Group(x[i], ib, l, q);
        for (int j = 0; j < 8; ++j) dst[j] = db * static_cast<float>(q[j]);
      }
    }
  }
}

}  // namespace

void dequantize_iq2_xxs(const void* src, float* dst, int64_t n) {
  dequantize_xxs<block_iq2_xxs, iq2_xxs_sub>(src, dst, n, 0.25f);
}
void dequantize_iq3_xxs(const void* src, float* dst, int64_t n) {
  dequantize_xxs<block_iq3_xxs, iq3_xxs_sub>(src, dst, n, 0.5f);
}
void dequantize_iq2_xs(const void* src, float* dst, int64_t n) {
  dequantize_scaled16<block_iq2_xs, iq2_xs_group>(src, dst, n);
}
void dequantize_iq2_s(const void* src, float* dst, int64_t n) {
  dequantize_scaled16<block_iq2_s, iq2_s_group>(src, dst, n);
}

void dequantize_iq3_s(const void* src, float* dst, int64_t n) {
  const auto* x = static_cast<const block_iq3_s*>(src);
  int8_t q[kQK];
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float d = half_to_float(x[i].d);
    for (int ib = 0; ib < kQK_K / kQK; ++ib, dst += kQK) {
      const float db = d * static_cast<float>(1 + 2 * iq3_s_scale(x[i], ib));
      iq3_s_sub(x[i], ib, q);
      for (int j = 0; j < kQK; ++j) dst[j] = db * static_cast<float>(q[j]);
    }
  }
}

void dequantize_iq1_s(const void* src, float* dst, int64_t n) {
  const auto* x = static_cast<const block_iq1_s*>(src);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float d = half_to_float(x[i].d);
    for (int ib = 0; ib < kQK_K / kQK; ++ib) {
      const float dl = d * static_cast<float>(2 * ((x[i].qh[ib] >> 12) & 7) + 1);
      const float delta = x[i].qh[ib] & 0x8000 ? -kIq1Delta : kIq1Delta;
      for (int l = 0; l < 4; ++l, dst += 8) {
        const int8_t* p = iq1_point(iq1_s_index(x[i], ib, l));
        for (int j = 0; j < 8; ++j) dst[j] = dl * (static_cast<float>(p[j]) + delta);
      }
    }
  }
}

void dequantize_iq1_m(const void* src, float* dst, int64_t n) {
  const auto* x = static_cast<const block_iq1_m*>(src);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    uint16_t sc[4];
    iq1_m_scale_words(x[i], sc);
    const float d = half_to_float(iq1_m_d(sc));
    for (int ib = 0; ib < kQK_K / kQK; ++ib) {
      for (int l = 0; l < 4; ++l, dst += 8) {
        const float dl = d * static_cast<float>(2 * iq1_m_scale(sc, ib, l / 2) + 1);
        const float delta = iq1_m_minus(x[i], ib, l) ? -kIq1Delta : kIq1Delta;
        const int8_t* p = iq1_point(iq1_m_index(x[i], ib, l));
        for (int j = 0; j < 8; ++j) dst[j] = dl * (static_cast<float>(p[j]) + delta);
      }
    }
  }
}

namespace {

// IQ2_XXS and IQ3_XXS: sum_b d_w d_x sum_ib (2 ls + 1) sum_j q_j x_j, times
// c (1/8, 1/4).
template <typename Block, int (*Sub)(const Block&, int, int8_t*)>
float dot_xxs(const void* w, const void* xv, int64_t n, float c) {
  const auto* x = static_cast<const Block*>(w);
  const auto* y = static_cast<const block_q8_K*>(xv);
  int8_t q[kQK];
  float sumf = 0;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int32_t bsum = 0;
    for (int ib = 0; ib < kQK_K / kQK; ++ib) {
      const int ls = 2 * Sub(x[i], ib, q) + 1;
      int sumi = 0;
      for (int l = 0; l < 4; ++l) sumi += dot8(q + 8 * l, y[i].qs + kQK * ib + 8 * l);
      bsum += sumi * ls;
    }
    sumf += half_to_float(x[i].d) * y[i].d * static_cast<float>(bsum);
  }
  return c * sumf;
}

}  // namespace

float dot_iq2_xxs(const void* w, const void* x, int64_t n) {
  return dot_xxs<block_iq2_xxs, iq2_xxs_sub>(w, x, n, 0.125f);
}
float dot_iq3_xxs(const void* w, const void* x, int64_t n) {
  return dot_xxs<block_iq3_xxs, iq3_xxs_sub>(w, x, n, 0.25f);
}

// As IQ2_XXS with a scale per 16 weights.
template <typename Block, void (*Group)(const Block&, int, int, int8_t*)>
float dot_iq2_scaled16(const void* w, const void* xv, int64_t n) {
  const auto* x = static_cast<const Block*>(w);
  const auto* y = static_cast<const block_q8_K*>(xv);
  float sumf = 0;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int32_t bsum = 0;
    for (int ib = 0; ib < kQK_K / kQK; ++ib) {
      for (int h = 0; h < 2; ++h) {
        int sumi = 0;
        for (int l = 2 * h; l < 2 * h + 2; ++l) {
          int8_t q[8];
          Group(x[i], ib, l, q);
          sumi += dot8(q, y[i].qs + kQK * ib + 8 * l);
        }
        bsum += sumi * (2 * ((x[i].scales[ib] >> (4 * h)) & 0xF) + 1);
      }
    }
    sumf += half_to_float(x[i].d) * y[i].d * static_cast<float>(bsum);
  }
  return 0.125f * sumf;
}

float dot_iq2_xs(const void* w, const void* x, int64_t n) {
  return dot_iq2_scaled16<block_iq2_xs, iq2_xs_group>(w, x, n);
}
float dot_iq2_s(const void* w, const void* x, int64_t n) {
  return dot_iq2_scaled16<block_iq2_s, iq2_s_group>(w, x, n);
}

float dot_iq3_s(const void* w, const void* xv, int64_t n) {
  const auto* x = static_cast<const block_iq3_s*>(w);
  const auto* y = static_cast<const block_q8_K*>(xv);
  int8_t q[kQK];
  float sumf = 0;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int32_t bsum = 0;
    for (int ib = 0; ib < kQK_K / kQK; ++ib) {
      iq3_s_sub(x[i], ib, q);
      int sumi = 0;
      for (int l = 0; l < 4; ++l) sumi += dot8(q + 8 * l, y[i].qs + kQK * ib + 8 * l);
      bsum += sumi * (2 * iq3_s_scale(x[i], ib) + 1);
    }
    sumf += half_to_float(x[i].d) * y[i].d * static_cast<float>(bsum);
  }
  return sumf;
}

// sum_b d_w d_x (sum_ib ls sum_j p_j x_j + delta sum_ib ls (+-1) bsums).
float dot_iq1_s(const void* w, const void* xv, int64_t n) {
  const auto* x = static_cast<const block_iq1_s*>(w);
  const auto* y = static_cast<const block_q8_K*>(xv);
  float sumf = 0;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int sumi = 0, sumi1 = 0;
    for (int ib = 0; ib < kQK_K / kQK; ++ib) {
      const int ls = 2 * ((x[i].qh[ib] >> 12) & 7) + 1;
      const int delta = x[i].qh[ib] & 0x8000 ? -1 : 1;
      int lsum = 0;
      for (int l = 0; l < 4; ++l)
        lsum += dot8(iq1_point(iq1_s_index(x[i], ib, l)), y[i].qs + kQK * ib + 8 * l);
      sumi += ls * lsum;
      sumi1 += ls * delta * (y[i].bsums[2 * ib] + y[i].bsums[2 * ib + 1]);
    }
    sumf += half_to_float(x[i].d) * y[i].d *
            (static_cast<float>(sumi) + kIq1Delta * static_cast<float>(sumi1));
  }
  return sumf;
}

float dot_iq1_m(const void* w, const void* xv, int64_t n) {
  const auto* x = static_cast<const block_iq1_m*>(w);
  const auto* y = static_cast<const block_q8_K*>(xv);
  float sumf = 0;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    uint16_t sc[4];
    iq1_m_scale_words(x[i], sc);
    int sumi1 = 0, sumi2 = 0;
    for (int ib = 0; ib < kQK_K / kQK; ++ib) {
      int sum1[2] = {0, 0}, sum2[2] = {0, 0};
      for (int l = 0; l < 4; ++l) {
        const int8_t* q8 = y[i].qs + kQK * ib + 8 * l;
        int lsum2 = 0;
        for (int j = 0; j < 8; ++j) lsum2 += q8[j];
        sum1[l / 2] += dot8(iq1_point(iq1_m_index(x[i], ib, l)), q8);
        sum2[l / 2] += iq1_m_minus(x[i], ib, l) ? -lsum2 : lsum2;
      }
      const int ls1 = 2 * iq1_m_scale(sc, ib, 0) + 1, ls2 = 2 * iq1_m_scale(sc, ib, 1) + 1;
      sumi1 += sum1[0] * ls1 + sum1[1] * ls2;
      sumi2 += sum2[0] * ls1 + sum2[1] * ls2;
    }
    sumf += half_to_float(iq1_m_d(sc)) * y[i].d *
            (static_cast<float>(sumi1) + kIq1Delta * static_cast<float>(sumi2));
  }
  return sumf;
}

}  // namespace colibri::ref
