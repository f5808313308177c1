// Scalar attention of one query head: the loops of llama2.c's run.c, with the
// softmax denominator summed in double.
#include <algorithm>
#include <cmath>

#include "tensor/half.h"
#include "tensor/kernels/ref/ref.h"

namespace colibri::ref {

namespace {

float to_f32(float x) { return x; }
float to_f32(uint16_t h) { return half_to_float(h); }

// out = softmax(scale * q K^T) V over positions 0..n_pos-1; KV is the cache's
// element type (float, or F16 bits read exactly as floats).
template <typename KV>
void attend_t(const float* q, const KV* k, size_t k_stride, const KV* v, size_t v_stride,
              int64_t n_pos, int head_dim, int head_dim_v, float scale, float* scores, float* out) {
  float max = -INFINITY;
  for (int64_t p = 0; p < n_pos; ++p) {
    const KV* kp = k + p * k_stride;
    float s = 0;
    for (int i = 0; i < head_dim; ++i) s += q[i] * to_f32(kp[i]);
    scores[p] = s * scale;
    max = std::max(max, scores[p]);
  }
  double sum = 0;
  for (int64_t p = 0; p < n_pos; ++p) {
    scores[p] = std::exp(scores[p] - max);
    sum += scores[p];
  }
  const float inv = static_cast<float>(1.0 / sum);
  std::fill(out, out + head_dim_v, 0.f);
  for (int64_t p = 0; p < n_pos; ++p) {
    const float a = scores[p] * inv;
    const KV* vp = v + p * v_stride;
    for (int i = 0; i < head_dim_v; ++i) out[i] += a * to_f32(vp[i]);
  }
}

template <typename KV>
void attend_batch_t(const float* q, size_t q_stride, int n_q, const int32_t* n_pos, const KV* k,
                    size_t k_stride, const KV* v, size_t v_stride, int head_dim, int head_dim_v,
                    float scale, float* scores, float* out, size_t out_stride) {
  for (int i = 0; i < n_q; ++i)
    attend_t(q + i * q_stride, k, k_stride, v, v_stride, n_pos[i], head_dim, head_dim_v, scale,
             scores, out + i * out_stride);
}

}  // namespace

void attend(const float* q, const float* k, size_t k_stride, const float* v, size_t v_stride,
            int64_t n_pos, int head_dim, int head_dim_v, float scale, float* scores, float* out) {
  attend_t(q, k, k_stride, v, v_stride, n_pos, head_dim, head_dim_v, scale, scores, out);
}

void attend_f16(const float* q, const uint16_t* k, size_t k_stride, const uint16_t* v, size_t v_stride,
                int64_t n_pos, int head_dim, int head_dim_v, float scale, float* scores, float* out) {
  attend_t(q, k, k_stride, v, v_stride, n_pos, head_dim, head_dim_v, scale, scores, out);
}

void attend_batch(const float* q, size_t q_stride, int n_q, const int32_t* n_pos, const float* k,
                  size_t k_stride, const float* v, size_t v_stride, int head_dim, int head_dim_v,
                  float scale, float* scores, float* out, size_t out_stride) {
  attend_batch_t(q, q_stride, n_q, n_pos, k, k_stride, v, v_stride, head_dim, head_dim_v, scale, scores,
                 out, out_stride);
}

void attend_batch_f16(const float* q, size_t q_stride, int n_q, const int32_t* n_pos, const uint16_t* k,
                      size_t k_stride, const uint16_t* v, size_t v_stride, int head_dim, int head_dim_v,
                      float scale, float* scores, float* out, size_t out_stride) {
  attend_batch_t(q, q_stride, n_q, n_pos, k, k_stride, v, v_stride, head_dim, head_dim_v, scale, scores,
                 out, out_stride);
}

}  // namespace colibri::ref
