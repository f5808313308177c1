// Scalar attention of one query head: the loops of llama2.c's run.c, with the
// softmax denominator summed in double.
#include <algorithm>
#include <cmath>

#include "tensor/kernels/ref/ref.h"
#include "tensor/kv_row.h"

namespace colibri::ref {

// out = softmax(scale * q K^T) V over positions 0..n_pos-1; KV is the cache's
// row unit (float, F16 bits, a q8_0 or q4_0 block, read exactly as the floats they
// hold: tensor/kv_row.h).
template <typename KV>
void attend(const float* q, const KV* k, size_t k_stride, const KV* v, size_t v_stride, int64_t n_pos,
            int head_dim, int head_dim_v, float scale, float* scores, float* out, float sink) {
  float max = -INFINITY;
  for (int64_t p = 0; p < n_pos; ++p) {
    const KV* kp = k + p * k_stride;
    float s = 0;
    for (int i = 0; i < head_dim; ++i) s += q[i] * kv_value(kp, i);
    scores[p] = s * scale;
    max = std::max(max, scores[p]);
  }
  // A sink enters the denominator only, at its own logit.
  max = std::max(max, sink);
  double sum = std::exp(sink - max);
  for (int64_t p = 0; p < n_pos; ++p) {
    scores[p] = std::exp(scores[p] - max);
    sum += scores[p];
  }
  const float inv = static_cast<float>(1.0 / sum);
  std::fill(out, out + head_dim_v, 0.f);
  for (int64_t p = 0; p < n_pos; ++p) {
    const float a = scores[p] * inv;
    const KV* vp = v + p * v_stride;
    for (int i = 0; i < head_dim_v; ++i) out[i] += a * kv_value(vp, i);
  }
}

template <typename KV>
void attend_batch(const float* q, size_t q_stride, int n_q, const int32_t* n_pos, const KV* k,
                  size_t k_stride, const KV* v, size_t v_stride, int head_dim, int head_dim_v,
                  float scale, float* scores, float* out, size_t out_stride, float sink) {
  for (int i = 0; i < n_q; ++i)
    attend(q + i * q_stride, k, k_stride, v, v_stride, n_pos[i], head_dim, head_dim_v, scale, scores,
           out + i * out_stride, sink);
}

template void attend<float>(const float*, const float*, size_t, const float*, size_t, int64_t, int, int,
                            float, float*, float*, float);
template void attend<uint16_t>(const float*, const uint16_t*, size_t, const uint16_t*, size_t, int64_t, int,
                               int, float, float*, float*, float);
template void attend_batch<float>(const float*, size_t, int, const int32_t*, const float*, size_t,
                                  const float*, size_t, int, int, float, float*, float*, size_t, float);
template void attend_batch<uint16_t>(const float*, size_t, int, const int32_t*, const uint16_t*, size_t,
                                     const uint16_t*, size_t, int, int, float, float*, float*, size_t, float);
template void attend<block_q8_0>(const float*, const block_q8_0*, size_t, const block_q8_0*, size_t, int64_t,
                                 int, int, float, float*, float*, float);
template void attend_batch<block_q8_0>(const float*, size_t, int, const int32_t*, const block_q8_0*, size_t,
                                       const block_q8_0*, size_t, int, int, float, float*, float*, size_t, float);
template void attend<block_q4_0>(const float*, const block_q4_0*, size_t, const block_q4_0*, size_t,
                                 int64_t, int, int, float, float*, float*, float);
template void attend_batch<block_q4_0>(const float*, size_t, int, const int32_t*, const block_q4_0*,
                                       size_t, const block_q4_0*, size_t, int, int, float, float*,
                                       float*, size_t, float);

}  // namespace colibri::ref
