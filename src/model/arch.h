// Model families as data.
//
// Every family runs through the one generic transformer (transformer.cpp);
// what differs between them is this table: which optional tensors a block has
// and how a few steps behave. Adding a family is one entry here.
#pragma once

#include <string_view>

namespace colibri {

enum class RopeStyle {
  kNormal,  // rotate interleaved pairs (x0, x1), (x2, x3), ... (llama)
  kNeox,    // rotate halves (x_i, x_{i + d/2}) (GPT-NeoX, Qwen, OLMoE)
};

enum class QkNorm {
  kNone,
  kPerHead,  // RMSNorm over each head's head_dim values (qwen3moe)
  kFull,     // RMSNorm over the whole q / k projection (olmoe)
};

struct ArchInfo {
  std::string_view name;        // general.architecture, also the hparam key prefix
  RopeStyle rope;
  QkNorm qk_norm;
  bool attn_bias;               // q/k/v projections carry biases (qwen2moe)
  bool renorm_expert_weights;   // top-k router weights divided by their sum
  bool shared_expert_gated;     // shared expert scaled by sigmoid(ffn_gate_inp_shexp . x)
  float default_rms_eps;
  float default_rope_base;
};

// nullptr for an architecture we do not run.
const ArchInfo* find_arch(std::string_view name);

// "qwen3moe, qwen2moe, olmoe, llama" for error messages.
const char* supported_arch_names();

}  // namespace colibri
