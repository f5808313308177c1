// The model's tensors, bound by name from the GGUF tensor table with their
// shapes checked (tensor blk.3.ffn_up_exps.weight: expected 3 dims, file has 2).
//
// Shapes below are written outermost first, as (rows, row length): a matrix
// mapping n_in -> n_out is (n_out, n_in) and has ne = {n_in, n_out}.
#pragma once

#include <vector>

#include "model/config.h"
#include "moe/expert_store.h"
#include "tensor/view.h"

namespace colibri {

class GgufFile;

struct LayerWeights {
  TensorView attn_norm;  // (n_embd)
  TensorView wq;         // (n_head * head_dim, n_embd)
  TensorView wk;         // (n_head_kv * head_dim, n_embd)
  TensorView wv;         // (n_head_kv * head_dim_v, n_embd)
  TensorView wo;         // (n_embd, n_head * head_dim_v)
  TensorView bq, bk, bv; // (n_embd_q), (n_embd_k), (n_embd_v); attn_bias families only
  TensorView q_norm;     // (head_dim) per head, or (n_embd_q) for QkNorm::kFull
  TensorView k_norm;     // (head_dim) per head, or (n_embd_k)
  TensorView ffn_norm;   // (n_embd)

  bool moe = false;
  // Dense FFN (dense layers only).
  TensorView ffn_gate;  // (n_ff, n_embd)
  TensorView ffn_up;    // (n_ff, n_embd)
  TensorView ffn_down;  // (n_embd, n_ff)
  // MoE: the router here; routed experts only through the ExpertStore.
  TensorView router;    // ffn_gate_inp: (n_expert, n_embd)
  // Shared expert (qwen2moe): always resident.
  TensorView shexp_gate;      // (n_ff_shexp, n_embd)
  TensorView shexp_up;        // (n_ff_shexp, n_embd)
  TensorView shexp_down;      // (n_embd, n_ff_shexp)
  TensorView shexp_gate_inp;  // (n_embd): sigmoid gate of the shared expert
};

struct ModelWeights {
  TensorView token_embd;   // (n_vocab, n_embd)
  TensorView output_norm;  // (n_embd)
  TensorView output;       // (n_vocab, n_embd); token_embd when tied
  std::vector<LayerWeights> layers;    // (n_layer)
  std::vector<ExpertTensors> experts;  // (n_layer); for the expert store
  uint64_t dense_bytes = 0;   // every tensor but the routed expert stacks
  uint64_t expert_bytes = 0;  // all routed expert stacks
};

// Binds every tensor the config calls for; fills cfg.n_vocab from the
// embedding when the metadata lacks it. Throws Error on a missing tensor, a
// wrong shape or a type the tensor may not have.
ModelWeights bind_weights(const GgufFile& f, ModelConfig& cfg);

}  // namespace colibri
