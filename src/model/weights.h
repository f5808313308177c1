// The model's tensors, bound by name from the GGUF tensor table with their
// shapes checked (tensor blk.3.ffn_up_exps.weight: expected 3 dims, file has 2).
//
// Shapes below are written outermost first, as (rows, row length): a matrix
// mapping n_in -> n_out is (n_out, n_in) and has ne = {n_in, n_out}.
#pragma once

#include <memory>
#include <vector>

#include "base/aligned_buffer.h"
#include "model/config.h"
#include "moe/expert_store.h"
#include "tensor/view.h"

namespace colibri {

class GgufFile;

struct LayerWeights {
  TensorView attn_norm;  // (n_embd)
  TensorView wq;         // (n_head * head_dim, n_embd); MLA: (n_head * (nope + rope), n_embd) or absent
  TensorView wk;         // (n_head_kv * head_dim, n_embd)
  TensorView wv;         // (n_head_kv * head_dim_v, n_embd)
  TensorView wo;         // (n_embd, n_head * head_dim_v); MLA: (n_embd, n_head * v)
  TensorView bq, bk, bv; // (n_embd_q), (n_embd_k), (n_embd_v), where the file has them
  TensorView bo;         // (n_embd): attn_output.bias, where the file has it
  TensorView q_norm;     // (head_dim) per head, or (n_embd_q) for QkNorm::kFull
  TensorView k_norm;     // (head_dim) per head, or (n_embd_k)
  TensorView sinks;      // (n_head): attention sinks, one logit per query head
  // Multi-head latent attention (MLA families).
  TensorView wq_a;       // (q_lora_rank, n_embd); absent when q_lora_rank is 0
  TensorView q_a_norm;   // (q_lora_rank)
  TensorView wq_b;       // (n_head * (nope + rope), q_lora_rank)
  TensorView wkv_a;      // (kv_lora_rank + rope, n_embd): latent and shared rope key
  TensorView kv_a_norm;  // (kv_lora_rank)
  TensorView wk_b;       // (n_head, kv_lora_rank, nope): q_nope -> latent space, per head
  TensorView wv_b;       // (n_head, v, kv_lora_rank): latent -> values, per head
  TensorView ffn_norm;   // (n_embd)

  bool moe = false;
  // Dense FFN (dense layers only).
  TensorView ffn_gate;  // (n_ff, n_embd)
  TensorView ffn_up;    // (n_ff, n_embd)
  TensorView ffn_down;  // (n_embd, n_ff)
  // MoE: the router here; routed experts only through the ExpertStore.
  TensorView router;    // ffn_gate_inp: (n_expert, n_embd)
  TensorView router_b;  // (n_expert): ffn_gate_inp.bias, added to the logits (GPT-OSS)
  TensorView exp_probs_b;  // (n_expert): selection bias (DeepSeek-V3, GLM)
  // Routed experts' biases (GPT-OSS), resident: (n_expert, n_ff_exp) for
  // gate and up, (n_expert, n_embd) for down.
  TensorView gate_exps_b, up_exps_b, down_exps_b;
  // Shared expert (qwen2moe): always resident.
  TensorView shexp_gate;      // (n_ff_shexp, n_embd)
  TensorView shexp_up;        // (n_ff_shexp, n_embd)
  TensorView shexp_down;      // (n_embd, n_ff_shexp)
  TensorView shexp_gate_inp;  // (n_embd): sigmoid gate of the shared expert

  // Every tensor of the layer, for code that handles them alike (the dense
  // arena); absent ones are empty views.
  template <typename F>
  void for_each(F&& f) {
    for (TensorView* v : {&attn_norm, &wq, &wk, &wv, &wo, &bq, &bk, &bv, &bo, &q_norm, &k_norm, &sinks, &wq_a,
                          &q_a_norm, &wq_b, &wkv_a, &kv_a_norm, &wk_b, &wv_b, &ffn_norm, &ffn_gate, &ffn_up,
                          &ffn_down, &router, &router_b, &exp_probs_b, &gate_exps_b, &up_exps_b, &down_exps_b,
                          &shexp_gate, &shexp_up, &shexp_down, &shexp_gate_inp})
      f(*v);
  }
  template <typename F>
  void for_each(F&& f) const {
    const_cast<LayerWeights*>(this)->for_each([&](TensorView& v) { f(static_cast<const TensorView&>(v)); });
  }
};

struct ModelWeights {
  TensorView token_embd;   // (n_vocab, n_embd)
  TensorView output_norm;  // (n_embd)
  TensorView output;       // (n_vocab, n_embd); token_embd when tied
  std::vector<LayerWeights> layers;    // (n_layer)
  std::vector<ExpertTensors> experts;  // (n_layer); for the expert store
  // Tensors derived at load from another layout (MLA's older attn_kv_b split
  // into attn_k_b / attn_v_b), resident; views point into them, so copies of
  // the weights share them.
  std::vector<std::shared_ptr<AlignedBuffer<uint8_t>>> derived;
  uint64_t derived_bytes = 0;
  uint64_t dense_bytes = 0;   // every tensor but the routed expert stacks
  uint64_t expert_bytes = 0;  // all routed expert stacks
};

// Binds every tensor the config calls for; fills cfg.n_vocab from the
// embedding when the metadata lacks it. Throws Error on a missing tensor, a
// wrong shape or a type the tensor may not have.
ModelWeights bind_weights(const GgufFile& f, ModelConfig& cfg);

}  // namespace colibri
