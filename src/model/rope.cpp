#include "model/rope.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace colibri {

namespace {

// The pair index where YaRN's correction for n_rotations full turns over
// the original context lies (ggml_rope_yarn_corr_dim).
float yarn_corr_dim(int n_rot, int n_ctx_orig, float n_rotations, float base) {
  return n_rot * std::log(n_ctx_orig / (n_rotations * 2 * std::numbers::pi_v<float>)) / (2 * std::log(base));
}

}  // namespace

void rope_angles(const ModelConfig& c, int pos, float* cos, float* sin) {
  const int half = c.n_rot / 2;
  const float theta_scale = std::pow(c.rope_base, -2.0f / c.n_rot);
  float lo = 0, hi = 0;
  if (c.yarn_ext_factor != 0.f) {
    lo = std::max(0.f, std::floor(yarn_corr_dim(c.n_rot, c.n_ctx_orig_yarn, c.yarn_beta_fast, c.rope_base)));
    hi = std::min(static_cast<float>(c.n_rot - 1),
                  std::ceil(yarn_corr_dim(c.n_rot, c.n_ctx_orig_yarn, c.yarn_beta_slow, c.rope_base)));
  }
  float theta = static_cast<float>(pos);
  for (int i = 0; i < half; ++i) {
    const float theta_interp = c.rope_freq_scale * theta;
    float t = theta_interp;
    if (c.yarn_ext_factor != 0.f) {
      const float y = (static_cast<float>(i) - lo) / std::max(0.001f, hi - lo);
      const float ramp = (1 - std::min(1.f, std::max(0.f, y))) * c.yarn_ext_factor;
      t = theta_interp * (1 - ramp) + theta * ramp;
    }
    cos[i] = std::cos(t) * c.rope_mscale;
    sin[i] = std::sin(t) * c.rope_mscale;
    theta *= theta_scale;
  }
}

void rope_head(float* x, int n_rot, RopeStyle style, const float* cos, const float* sin) {
  const int half = n_rot / 2;
  for (int i = 0; i < half; ++i) {
    const int a = style == RopeStyle::kNormal ? 2 * i : i;
    const int b = style == RopeStyle::kNormal ? 2 * i + 1 : i + half;
    const float x0 = x[a], x1 = x[b];
    x[a] = x0 * cos[i] - x1 * sin[i];
    x[b] = x0 * sin[i] + x1 * cos[i];
  }
}

}  // namespace colibri
