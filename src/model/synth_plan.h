// What a synthetic file holds: the tensors (names, shapes, the type
// llama-quantize would give each) and the <arch>.* keys, as llama.cpp's
// converter writes them for the shape's family. synth.cpp fills the data.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/synth.h"
#include "tensor/dtype.h"

namespace colibri {

class GgufWriter;

namespace synth {

// How a tensor's rows are made (synth.cpp's RowMaker) and how llama-quantize
// treats it.
enum class Role {
  kEmbd,
  kOutput,
  kNorm,
  kAttnQ,       // attn_q: reads the normed residual
  kAttnK,
  kAttnV,
  kAttnOut,     // attn_output: writes the residual
  kReadsResid,  // the MLA down-projections attn_q_a, attn_kv_a_mqa: read the normed residual
  kInner,       // matrices that read no residual: attn_q_b, attn_k_b, attn_v_b, nextn.eh_proj
  kBias,        // q/k/v and expert gate/up biases
  kOutBias,     // biases added to the residual: attn_output.bias, ffn_down_exps.bias
  kRouter,
  kRouterBias,  // ffn_gate_inp.bias (GPT-OSS)
  kExpProbsB,   // exp_probs_b.bias: the selection bias
  kSinks,       // attn_sinks (GPT-OSS)
  kShexpGateInp,
  kGate,
  kUp,
  kDown,  // ffn_down, ffn_down_exps, ffn_down_shexp: write the residual
};

struct TensorPlan {
  std::string name;
  Role role;
  int layer = -1;
  std::vector<int64_t> ne;  // innermost first
  DType type = DType::F32;
  float sigma = 0;  // standard deviation of the values (matrices: scale / sqrt(fan_in))
};

// Layers a file of these options holds: a slice's n_layers, or the model's
// own layers and its NextN layers.
int synth_block_count(const SynthOptions& o);

// Every tensor of the file, in the converter's order, with its type.
std::vector<TensorPlan> plan_tensors(const SynthOptions& o);

// The <arch>.* keys.
void write_hparams(GgufWriter& w, const SynthOptions& o);

// llama_ftype of a file type (general.file_type).
uint32_t file_type_id(SynthType t);

}  // namespace synth
}  // namespace colibri
