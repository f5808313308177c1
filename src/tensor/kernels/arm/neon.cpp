// Plain ARMv8 NEON kernels (every AArch64 CPU, Cortex-A53 and up): the float
// dots, the activation quantizers, attention and silu, and the integer dots
// of neon_common.h on smull + sadalp. The dotprod and i8mm levels overlay
// this table (neon_dotprod.cpp, neon_i8mm.cpp), and on any level the F16 and
// BF16 dots are replaced where the CPU multiplies 16-bit floats into fp32
// itself (neon_fhm.cpp, neon_bf16.cpp), with the same values.
#define CLB_ARM_DOTPROD 0
#include <algorithm>
#include <cmath>

#include "tensor/kernels/arm/neon_common.h"
#include "tensor/kernels/arm/neon_widening.h"
#include "tensor/kv_row.h"

namespace colibri {
namespace {

// ---- float dots ----

// F32: 16 elements a step in four accumulators, then 4, then a scalar tail.
float dot_f32(const void* wv, const void* xv, int64_t n) {
  const auto* a = static_cast<const float*>(wv);
  const auto* b = static_cast<const float*>(xv);
  float32x4_t acc[4] = {vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0)};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int k = 0; k < 4; ++k)
      acc[k] = vfmaq_f32(acc[k], vld1q_f32(a + i + 4 * k), vld1q_f32(b + i + 4 * k));
  for (; i + 4 <= n; i += 4) acc[0] = vfmaq_f32(acc[0], vld1q_f32(a + i), vld1q_f32(b + i));
  float s = vaddvq_f32(vaddq_f32(vaddq_f32(acc[0], acc[1]), vaddq_f32(acc[2], acc[3])));
  for (; i < n; ++i) s = std::fma(a[i], b[i], s);
  return s;
}

// F16 and BF16 widen exactly to F32 (F16 through fcvtl, subnormals included;
// BF16 is F32's top half). Eight elements a step in neon_widening.h's lanes,
// which fmlal (neon_fhm.cpp) and bfmlalb / bfmlalt (neon_bf16.cpp) fill the
// same way.
struct F16Widen {
  static void mac8(float32x4_t& lo, float32x4_t& hi, uint16x8_t w, uint16x8_t x) {
    const float16x8_t a = vreinterpretq_f16_u16(w), b = vreinterpretq_f16_u16(x);
    lo = vfmaq_f32(lo, vcvt_f32_f16(vget_low_f16(a)), vcvt_f32_f16(vget_low_f16(b)));
    hi = vfmaq_f32(hi, vcvt_high_f32_f16(a), vcvt_high_f32_f16(b));
  }
  static float to_float(uint16_t h) { return half_to_float(h); }
};

// A BF16 pair in a 32-bit lane: the even element is its low half, shifted up,
// the odd one its high half, masked.
struct Bf16Widen {
  static void mac8(float32x4_t& even, float32x4_t& odd, uint16x8_t w, uint16x8_t x) {
    const uint32x4_t a = vreinterpretq_u32_u16(w), b = vreinterpretq_u32_u16(x);
    const uint32x4_t top = vdupq_n_u32(0xFFFF0000u);
    even = vfmaq_f32(even, vreinterpretq_f32_u32(vshlq_n_u32(a, 16)),
                     vreinterpretq_f32_u32(vshlq_n_u32(b, 16)));
    odd = vfmaq_f32(odd, vreinterpretq_f32_u32(vandq_u32(a, top)),
                    vreinterpretq_f32_u32(vandq_u32(b, top)));
  }
  static float to_float(uint16_t h) { return bf16_to_float(h); }
};

// ---- activation quantizers: the reference's bits exactly ----

// ggml's q8_0 / q8_1: d = max|x| / 127, q = roundf(x / d); vcvtaq rounds half
// away from zero as roundf does. Returns the block's sum of q (for q8_1).
inline int32_t quantize_block_32(const float* src, int8_t* qs, float* d_out) {
  float32x4_t v[8];
  float32x4_t amax = vdupq_n_f32(0);
  for (int k = 0; k < 8; ++k) {
    v[k] = vld1q_f32(src + 4 * k);
    amax = vmaxq_f32(amax, vabsq_f32(v[k]));
  }
  const float d = vmaxvq_f32(amax) / 127;
  const float inv = d != 0.0f ? 1.0f / d : 0.0f;
  int32x4_t sum = vdupq_n_s32(0);
  for (int k = 0; k < 8; k += 2) {
    const int32x4_t a = vcvtaq_s32_f32(vmulq_n_f32(v[k], inv));
    const int32x4_t b = vcvtaq_s32_f32(vmulq_n_f32(v[k + 1], inv));
    sum = vaddq_s32(sum, vaddq_s32(a, b));
    vst1_s8(qs + 4 * k, vmovn_s16(vcombine_s16(vmovn_s32(a), vmovn_s32(b))));
  }
  *d_out = d;
  return vaddvq_s32(sum);
}

void quantize_q8_0(const float* src, void* dst, int64_t n) {
  auto* y = static_cast<block_q8_0*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i, src += kQK) {
    float d;
    quantize_block_32(src, y[i].qs, &d);
    y[i].d = float_to_half(d);
  }
}

void quantize_q8_1(const float* src, void* dst, int64_t n) {
  auto* y = static_cast<block_q8_1*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i, src += kQK) {
    float d;
    const int32_t sum = quantize_block_32(src, y[i].qs, &d);
    y[i].d = float_to_half(d);
    y[i].s = float_to_half(static_cast<float>(sum) * d);
  }
}

// ggml's q8_K: the first element of largest magnitude maps to -127 * its sign,
// the rest round to nearest even (vcvtnq, as the reference's nearest_int).
void quantize_q8_K(const float* src, void* dst, int64_t n) {
  auto* y = static_cast<block_q8_K*>(dst);
  for (int64_t i = 0; i < n / kQK_K; ++i, src += kQK_K) {
    float32x4_t amax = vdupq_n_f32(0);
    for (int j = 0; j < kQK_K; j += 4) amax = vmaxq_f32(amax, vabsq_f32(vld1q_f32(src + j)));
    const float am = vmaxvq_f32(amax);
    if (am == 0.0f) {
      std::memset(&y[i], 0, sizeof(y[i]));
      continue;
    }
    int first = 0;
    while (std::fabs(src[first]) != am) ++first;
    const float iscale = -127.f / src[first];
    const int32x4_t top = vdupq_n_s32(127);
    for (int j = 0; j < kQK_K; j += 16) {
      int16x8_t h[2];
      for (int k = 0; k < 2; ++k) {
        const int32x4_t a =
            vminq_s32(vcvtnq_s32_f32(vmulq_n_f32(vld1q_f32(src + j + 8 * k), iscale)), top);
        const int32x4_t b =
            vminq_s32(vcvtnq_s32_f32(vmulq_n_f32(vld1q_f32(src + j + 8 * k + 4), iscale)), top);
        h[k] = vcombine_s16(vmovn_s32(a), vmovn_s32(b));
      }
      vst1q_s8(y[i].qs + j, vcombine_s8(vmovn_s16(h[0]), vmovn_s16(h[1])));
      y[i].bsums[j / 16] = static_cast<int16_t>(vaddvq_s16(vaddq_s16(h[0], h[1])));
    }
    y[i].d = 1 / iscale;
  }
}

// fcvtn rounds to nearest even and handles subnormals, infinities and NaN as
// float_to_half does (a NaN stays a quiet NaN).
void quantize_f16(const float* src, void* dst, int64_t n) {
  auto* h = static_cast<uint16_t*>(dst);
  int64_t i = 0;
  for (; i + 4 <= n; i += 4)
    vst1_u16(h + i, vreinterpret_u16_f16(vcvt_f16_f32(vld1q_f32(src + i))));
  for (; i < n; ++i) h[i] = float_to_half(src[i]);
}

// float_to_bf16's rounding (to nearest even, NaN kept quiet) on four lanes.
void quantize_bf16(const float* src, void* dst, int64_t n) {
  auto* h = static_cast<uint16_t*>(dst);
  const uint32x4_t bias = vdupq_n_u32(0x7FFF), one = vdupq_n_u32(1), inf = vdupq_n_u32(0x7F800000);
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const uint32x4_t u = vreinterpretq_u32_f32(vld1q_f32(src + i));
    const uint32x4_t rounded = vaddq_u32(u, vaddq_u32(bias, vandq_u32(vshrq_n_u32(u, 16), one)));
    const uint32x4_t nan = vorrq_u32(vshrq_n_u32(u, 16), vdupq_n_u32(0x40));
    const uint32x4_t is_nan = vcgtq_u32(vandq_u32(u, vdupq_n_u32(0x7FFFFFFF)), inf);
    vst1_u16(h + i, vmovn_u32(vbslq_u32(is_nan, nan, vshrq_n_u32(rounded, 16))));
  }
  for (; i < n; ++i) h[i] = float_to_bf16(src[i]);
}

// ---- silu and softmax: e^x on four lanes ----

// e^x for x <= 0 (Cephes expf: 2^n e^r with |r| <= ln2 / 2 and a degree-6
// polynomial; within 2 ulp). Inputs under -87.3 give ~1e-38, not 0.
inline float32x4_t exp_nonpositive(float32x4_t x) {
  x = vmaxq_f32(x, vdupq_n_f32(-87.3f));
  const float32x4_t n = vrndnq_f32(vmulq_n_f32(x, 1.44269504088896341f));
  float32x4_t r = vfmsq_f32(x, n, vdupq_n_f32(0.693359375f));
  r = vfmsq_f32(r, n, vdupq_n_f32(-2.12194440e-4f));
  float32x4_t p = vdupq_n_f32(1.9875691500e-4f);
  p = vfmaq_f32(vdupq_n_f32(1.3981999507e-3f), p, r);
  p = vfmaq_f32(vdupq_n_f32(8.3334519073e-3f), p, r);
  p = vfmaq_f32(vdupq_n_f32(4.1665795894e-2f), p, r);
  p = vfmaq_f32(vdupq_n_f32(1.6666665459e-1f), p, r);
  p = vfmaq_f32(vdupq_n_f32(5.0000001201e-1f), p, r);
  const float32x4_t y = vfmaq_f32(vaddq_f32(r, vdupq_n_f32(1.0f)), p, vmulq_f32(r, r));
  const int32x4_t e = vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(n), vdupq_n_s32(127)), 23);
  return vmulq_f32(y, vreinterpretq_f32_s32(e));
}

// silu(x) u = x sigmoid(x) u, the sigmoid from z = e^-|x| (never overflows):
// 1 / (1 + z) for x >= 0, z / (1 + z) below, 0 under -87 (where the clamped
// z would leave ~1e-38 that a large x scales back up).
inline float32x4_t silu_mul_4(float32x4_t x, float32x4_t u) {
  const float32x4_t one = vdupq_n_f32(1.0f);
  const float32x4_t z = exp_nonpositive(vnegq_f32(vabsq_f32(x)));
  const float32x4_t r = vdivq_f32(one, vaddq_f32(one, z));
  float32x4_t s = vbslq_f32(vcltzq_f32(x), vmulq_f32(z, r), r);
  s = vreinterpretq_f32_u32(vbicq_u32(vreinterpretq_u32_f32(s), vcltq_f32(x, vdupq_n_f32(-87.0f))));
  return vmulq_f32(vmulq_f32(x, s), u);
}

// The last partial vector goes through the same lanes, padded, so an
// element's value never depends on where it falls.
void silu_mul_neon(const float* g, const float* u, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) vst1q_f32(y + i, silu_mul_4(vld1q_f32(g + i), vld1q_f32(u + i)));
  if (i < n) {
    float gt[4] = {}, ut[4] = {}, yt[4];
    std::copy(g + i, g + n, gt);
    std::copy(u + i, u + n, ut);
    vst1q_f32(yt, silu_mul_4(vld1q_f32(gt), vld1q_f32(ut)));
    std::copy(yt, yt + (n - i), y + i);
  }
}

// ---- attention of one query head (kernel_table.h's AttendKvFn) ----

// Elements [i, i + 8) of a cached row as two fp32 vectors (F16: one load,
// fcvtl and fcvtl2; Q8_0 and Q4_0, i a multiple of 8: widened, converted and times
// the block's scale). All exact (tensor/kv_row.h).
inline void load_kv8(const float* row, int i, float32x4_t& lo, float32x4_t& hi) {
  lo = vld1q_f32(row + i);
  hi = vld1q_f32(row + i + 4);
}
inline void load_kv8(const uint16_t* row, int i, float32x4_t& lo, float32x4_t& hi) {
  const float16x8_t h = vreinterpretq_f16_u16(vld1q_u16(row + i));
  lo = vcvt_f32_f16(vget_low_f16(h));
  hi = vcvt_high_f32_f16(h);
}
inline void load_kv8(const block_q4_0* row, int i, float32x4_t& lo, float32x4_t& hi) {
  // Elements [j, j + 8) of a block: the low (j < 16) or high nibbles of
  // bytes [j % 16, j % 16 + 8).
  const block_q4_0& b = row[i / kQK];
  const int j = i % kQK;
  const uint8x8_t raw = vld1_u8(b.qs + j % (kQK / 2));
  const uint8x8_t nib = j < kQK / 2 ? vand_u8(raw, vdup_n_u8(0x0F)) : vshr_n_u8(raw, 4);
  const int16x8_t w = vsubq_s16(vreinterpretq_s16_u16(vmovl_u8(nib)), vdupq_n_s16(8));
  const float32x4_t d = vdupq_n_f32(half_to_float(b.d));
  lo = vmulq_f32(vcvtq_f32_s32(vmovl_s16(vget_low_s16(w))), d);
  hi = vmulq_f32(vcvtq_f32_s32(vmovl_high_s16(w)), d);
}
inline void load_kv8(const block_q8_0* row, int i, float32x4_t& lo, float32x4_t& hi) {
  const block_q8_0& b = row[i / kQK];
  const int16x8_t w = vmovl_s8(vld1_s8(b.qs + i % kQK));
  const float32x4_t d = vdupq_n_f32(half_to_float(b.d));
  lo = vmulq_f32(vcvtq_f32_s32(vmovl_s16(vget_low_s16(w))), d);
  hi = vmulq_f32(vcvtq_f32_s32(vmovl_high_s16(w)), d);
}

template <typename KV>
void attend_neon(const float* q, const KV* k, size_t k_stride, const KV* v, size_t v_stride,
                 int64_t n_pos, int head_dim, int head_dim_v, float scale, float* scores,
                 float* out, float sink) {
  float max = -INFINITY;
  for (int64_t p = 0; p < n_pos; ++p) {
    const KV* kp = k + p * k_stride;
    float32x4_t a0 = vdupq_n_f32(0), a1 = vdupq_n_f32(0);
    int i = 0;
    for (; i + 8 <= head_dim; i += 8) {
      float32x4_t k0, k1;
      load_kv8(kp, i, k0, k1);
      a0 = vfmaq_f32(a0, vld1q_f32(q + i), k0);
      a1 = vfmaq_f32(a1, vld1q_f32(q + i + 4), k1);
    }
    float s = vaddvq_f32(vaddq_f32(a0, a1));
    for (; i < head_dim; ++i) s = std::fma(q[i], kv_value(kp, i), s);
    scores[p] = s * scale;
    max = std::max(max, scores[p]);
  }
  max = std::max(max, sink);  // a sink joins the denominator only
  const float32x4_t maxv = vdupq_n_f32(max);
  float32x4_t sv = vdupq_n_f32(0);
  int64_t p = 0;
  for (; p + 4 <= n_pos; p += 4) {
    const float32x4_t e = exp_nonpositive(vsubq_f32(vld1q_f32(scores + p), maxv));
    vst1q_f32(scores + p, e);
    sv = vaddq_f32(sv, e);
  }
  float sum = vaddvq_f32(sv) + std::exp(sink - max);
  for (; p < n_pos; ++p) {
    scores[p] = std::exp(scores[p] - max);
    sum += scores[p];
  }
  const float inv = 1.0f / sum;
  // The weighted sum of V, 16 output dims a pass kept in registers.
  int i = 0;
  for (; i + 16 <= head_dim_v; i += 16) {
    float32x4_t o[4] = {vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0)};
    for (int64_t t = 0; t < n_pos; ++t) {
      const float32x4_t a = vdupq_n_f32(scores[t] * inv);
      const KV* vp = v + t * v_stride;
      for (int c = 0; c < 4; c += 2) {
        float32x4_t v0, v1;
        load_kv8(vp, i + 4 * c, v0, v1);
        o[c] = vfmaq_f32(o[c], a, v0);
        o[c + 1] = vfmaq_f32(o[c + 1], a, v1);
      }
    }
    for (int c = 0; c < 4; ++c) vst1q_f32(out + i + 4 * c, o[c]);
  }
  for (; i < head_dim_v; ++i) {
    float o = 0;
    for (int64_t t = 0; t < n_pos; ++t)
      o = std::fma(scores[t] * inv, kv_value(v + t * v_stride, i), o);
    out[i] = o;
  }
}

template <typename KV>
void attend_batch_neon(const float* q, size_t q_stride, int n_q, const int32_t* n_pos, const KV* k,
                       size_t k_stride, const KV* v, size_t v_stride, int head_dim, int head_dim_v,
                       float scale, float* scores, float* out, size_t out_stride, float sink) {
  for (int i = 0; i < n_q; ++i)
    attend_neon(q + i * q_stride, k, k_stride, v, v_stride, n_pos[i], head_dim, head_dim_v, scale,
                scores, out + i * out_stride, sink);
}

}  // namespace

void add_neon_kernels(KernelTable& t) {
  t.dot[slot(DType::F32)] = dot_f32;
  t.dot[slot(DType::F16)] = dot_widening<F16Widen>;
  t.dot[slot(DType::BF16)] = dot_widening<Bf16Widen>;
  add_neon_int_dots(t);
  t.quantize[slot(DType::F16)] = quantize_f16;
  t.quantize[slot(DType::BF16)] = quantize_bf16;
  t.quantize[slot(DType::Q8_0)] = quantize_q8_0;
  t.quantize[slot(DType::Q8_1)] = quantize_q8_1;
  t.quantize[slot(DType::Q8_K)] = quantize_q8_K;
  t.attend = attend_neon<float>;
  t.attend_batch = attend_batch_neon<float>;
  t.attend_f16 = attend_neon<uint16_t>;
  t.attend_batch_f16 = attend_batch_neon<uint16_t>;
  t.attend_q8_0 = attend_neon<block_q8_0>;
  t.attend_batch_q8_0 = attend_batch_neon<block_q8_0>;
  t.attend_q4_0 = attend_neon<block_q4_0>;
  t.attend_batch_q4_0 = attend_batch_neon<block_q4_0>;
  t.silu_mul = silu_mul_neon;
}

}  // namespace colibri
