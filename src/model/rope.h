// Rotary position embeddings: the angles of one position (plain, linearly
// scaled, or YaRN) and the rotation of one head by them.
#pragma once

#include "model/config.h"

namespace colibri {

// cos/sin of the n_rot / 2 rotation angles at position pos, as ggml's rope
// cache computes them: theta_i = pos * base^(-2i / n_rot) (accumulated by
// multiplication, as ggml does), scaled by freq_scale; YaRN keeps the
// original frequency on the fast pairs (below corr_low), the scaled one on the
// slow pairs (above corr_high), a linear mix between, and multiplies cos/sin
// by rope_mscale.
void rope_angles(const ModelConfig& c, int pos, float* cos, float* sin);

// Rotates the first n_rot dims of one head by the angles in cos/sin.
// Normal: pairs (x[2i], x[2i+1]); NeoX: pairs (x[i], x[i + n_rot/2]).
void rope_head(float* x, int n_rot, RopeStyle style, const float* cos, const float* sin);

}  // namespace colibri
