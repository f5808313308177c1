#include "model/synth_plan.h"

#include <cmath>

#include "base/error.h"
#include "formats/gguf_writer.h"
#include "model/arch.h"
#include "model/quant_mix.h"
#include "tensor/quant_blocks.h"

namespace colibri::synth {

namespace {

bool is_matrix(Role r) {
  switch (r) {
    case Role::kEmbd:
    case Role::kOutput:
    case Role::kAttnQ:
    case Role::kAttnK:
    case Role::kAttnV:
    case Role::kAttnOut:
    case Role::kReadsResid:
    case Role::kInner:
    case Role::kGate:
    case Role::kUp:
    case Role::kDown:
      return true;
    default:
      return false;
  }
}

// llama-quantize's choice for a tensor (model/quant_mix.h), the layer count
// the whole model's block_count, NextN layers included, as llama-quantize
// counts them (a --layers slice keeps the whole model's types).
DType pick_type(const SynthShape& s, SynthType ft, const TensorPlan& t) {
  if (ft == SynthType::kF32 || !is_matrix(t.role)) return DType::F32;
  if (ft == SynthType::kF16) return DType::F16;
  QuantMixModel m;
  m.n_layer_all = m.n_attn_v = s.n_layer + s.n_nextn;
  m.n_expert = s.n_expert;
  m.n_gqa = s.n_head_kv > 0 ? s.n_head / s.n_head_kv : 1;
  const int64_t ne2 = t.ne.size() > 2 ? t.ne[2] : 1;
  return quant_mix_type(*synth_quant_mix(ft), m, t.name, t.ne[0], ne2, t.layer);
}

}  // namespace

int synth_block_count(const SynthOptions& o) {
  return o.n_layers > 0 ? o.n_layers : o.shape.n_layer + o.shape.n_nextn;
}

std::vector<TensorPlan> plan_tensors(const SynthOptions& o) {
  const SynthShape& s = o.shape;
  const ArchInfo* a = find_arch(s.arch);
  CLB_CHECK(a != nullptr, "synth: shape %s: architecture %s is not supported", s.name, s.arch);
  const bool mla = a->attention == AttentionKind::kLatent;
  CLB_CHECK(!mla || (s.kv_lora_rank > 0 && s.qk_nope > 0 && s.v_head_dim > 0 && s.n_rot > 0),
            "synth: shape %s: latent attention needs kv_lora_rank, qk_nope, v_head_dim and n_rot", s.name);
  // GPT-OSS: biases on the attention output, the router and every expert.
  const bool oai = a->expert_activation == ExpertActivation::kSwigluClamped;
  const int64_t E = s.n_embd, V = s.n_vocab, X = s.n_expert, F = s.n_ff_exp, H = s.n_head;
  const int64_t S = s.n_ff_shexp > 0 ? s.n_ff_shexp : int64_t{s.n_expert_shared} * s.n_ff_exp;
  const int64_t nq = H * s.head_dim, nk = int64_t{s.n_head_kv} * s.head_dim;
  const int n_blocks = synth_block_count(o);
  // Residual projections scaled by 1/sqrt(2 n_layer) of the whole model, so a
  // slice's layers are the whole model's.
  const float resid = 1.0f / std::sqrt(2.0f * s.n_layer);
  std::vector<TensorPlan> p;
  // fan_in 0: ne[0], the row length.
  auto add = [&](std::string name, Role role, int layer, std::vector<int64_t> ne, float scale = 1.0f,
                 int64_t fan_in = 0) {
    const float sigma = scale / std::sqrt(static_cast<float>(fan_in > 0 ? fan_in : ne[0]));
    p.push_back({std::move(name), role, layer, std::move(ne), DType::F32, sigma});
  };
  add("token_embd.weight", Role::kEmbd, -1, {E, V}, std::sqrt(static_cast<float>(E)));  // N(0, 1)
  add("output_norm.weight", Role::kNorm, -1, {E});
  // Logits of standard deviation ~4, so greedy margins are like a real model's.
  add("output.weight", Role::kOutput, -1, {E, V}, 4.0f);
  for (int l = 0; l < n_blocks; ++l) {
    auto n = [l](const char* what, const char* kind = "weight") { return strprintf("blk.%d.%s.%s", l, what, kind); };
    add(n("attn_norm"), Role::kNorm, l, {E});
    if (mla) {
      const int64_t R = s.kv_lora_rank, q_width = H * (s.qk_nope + s.n_rot);
      if (s.q_lora_rank > 0) {
        add(n("attn_q_a"), Role::kReadsResid, l, {E, s.q_lora_rank});
        add(n("attn_q_a_norm"), Role::kNorm, l, {s.q_lora_rank});
        add(n("attn_q_b"), Role::kInner, l, {s.q_lora_rank, q_width});
      } else {
        add(n("attn_q"), Role::kAttnQ, l, {E, q_width});
      }
      add(n("attn_kv_a_mqa"), Role::kReadsResid, l, {E, R + s.n_rot});
      add(n("attn_kv_a_norm"), Role::kNorm, l, {R});
      // k_nope = attn_k_b^T c: its fan-in is the latent's width, that of the
      // kv_b_proj it is cut from.
      add(n("attn_k_b"), Role::kInner, l, {s.qk_nope, R, H}, 1.0f, R);
      add(n("attn_v_b"), Role::kInner, l, {R, s.v_head_dim, H});
      add(n("attn_output"), Role::kAttnOut, l, {H * s.v_head_dim, E}, resid);
    } else {
      const bool qkv_bias = a->attn_bias || s.attn_bias;
      add(n("attn_q"), Role::kAttnQ, l, {E, nq});
      if (qkv_bias) add(n("attn_q", "bias"), Role::kBias, l, {nq});
      add(n("attn_k"), Role::kAttnK, l, {E, nk});
      if (qkv_bias) add(n("attn_k", "bias"), Role::kBias, l, {nk});
      add(n("attn_v"), Role::kAttnV, l, {E, nk});
      if (qkv_bias) add(n("attn_v", "bias"), Role::kBias, l, {nk});
      add(n("attn_output"), Role::kAttnOut, l, {nq, E}, resid);
      if (oai) add(n("attn_output", "bias"), Role::kOutBias, l, {E});
      const bool qk_norm = !a->qk_norm_optional || s.optional_qk_norm;
      if (qk_norm && a->qk_norm == QkNorm::kPerHead) {
        add(n("attn_q_norm"), Role::kNorm, l, {s.head_dim});
        add(n("attn_k_norm"), Role::kNorm, l, {s.head_dim});
      } else if (qk_norm && a->qk_norm == QkNorm::kFull) {
        add(n("attn_q_norm"), Role::kNorm, l, {nq});
        add(n("attn_k_norm"), Role::kNorm, l, {nk});
      }
      if (a->attn_sinks) add(n("attn_sinks"), Role::kSinks, l, {H});
    }
    add(n(a->ffn_norm_name), Role::kNorm, l, {E});
    if (l < s.n_layer_dense_lead) {
      add(n("ffn_gate"), Role::kGate, l, {E, s.n_ff});
      add(n("ffn_up"), Role::kUp, l, {E, s.n_ff});
      add(n("ffn_down"), Role::kDown, l, {s.n_ff, E}, resid);
    } else {
      add(n("ffn_gate_inp"), Role::kRouter, l, {E, X});
      if (oai) add(n("ffn_gate_inp", "bias"), Role::kRouterBias, l, {X});
      if (s.exp_probs_b) add(n("exp_probs_b", "bias"), Role::kExpProbsB, l, {X});
      add(n("ffn_gate_exps"), Role::kGate, l, {E, F, X});
      if (oai) add(n("ffn_gate_exps", "bias"), Role::kBias, l, {F, X});
      add(n("ffn_up_exps"), Role::kUp, l, {E, F, X});
      if (oai) add(n("ffn_up_exps", "bias"), Role::kBias, l, {F, X});
      add(n("ffn_down_exps"), Role::kDown, l, {F, E, X}, resid);
      if (oai) add(n("ffn_down_exps", "bias"), Role::kOutBias, l, {E, X});
      if (S > 0) {
        if (a->shared_expert_gated) add(n("ffn_gate_inp_shexp"), Role::kShexpGateInp, l, {E});
        add(n("ffn_gate_shexp"), Role::kGate, l, {E, S});
        add(n("ffn_up_shexp"), Role::kUp, l, {E, S});
        add(n("ffn_down_shexp"), Role::kDown, l, {S, E}, resid);
      }
    }
    if (l >= s.n_layer) {  // a NextN layer: the tensors llama.cpp requires of it
      add(n("nextn.eh_proj"), Role::kInner, l, {2 * E, E});
      add(n("nextn.enorm"), Role::kNorm, l, {E});
      add(n("nextn.hnorm"), Role::kNorm, l, {E});
      add(n("nextn.shared_head_norm"), Role::kNorm, l, {E});
    }
  }
  for (TensorPlan& t : p) t.type = pick_type(s, o.type, t);
  return p;
}

uint32_t file_type_id(SynthType t) {  // llama_ftype
  if (t == SynthType::kF32) return 0;
  if (t == SynthType::kF16) return 1;
  return quant_mix_file_type(*synth_quant_mix(t));
}

void write_hparams(GgufWriter& w, const SynthOptions& o) {
  const SynthShape& s = o.shape;
  const bool mla = s.kv_lora_rank > 0;
  const std::string p = std::string(s.arch) + ".";
  w.set_u32(p + "vocab_size", s.n_vocab);
  w.set_u32(p + "context_length", s.n_ctx_train);
  w.set_u32(p + "embedding_length", s.n_embd);
  w.set_u32(p + "block_count", synth_block_count(o));
  w.set_u32(p + "feed_forward_length", s.n_ff);
  if (s.write_n_ff_exp) w.set_u32(p + "expert_feed_forward_length", s.n_ff_exp);
  if (s.n_ff_shexp) w.set_u32(p + "expert_shared_feed_forward_length", s.n_ff_shexp);
  w.set_u32(p + "expert_count", s.n_expert);
  w.set_u32(p + "expert_used_count", s.n_expert_used);
  w.set_u32(p + "attention.head_count", s.n_head);
  w.set_u32(p + "attention.head_count_kv", s.n_head_kv);
  if (mla) {
    // The cache row (one "head" of latent + rope key), and the decompressed
    // head sizes.
    w.set_u32(p + "attention.key_length", s.kv_lora_rank + s.n_rot);
    w.set_u32(p + "attention.value_length", s.kv_lora_rank);
    w.set_u32(p + "attention.key_length_mla", s.qk_nope + s.n_rot);
    w.set_u32(p + "attention.value_length_mla", s.v_head_dim);
    if (s.q_lora_rank > 0) w.set_u32(p + "attention.q_lora_rank", s.q_lora_rank);
    w.set_u32(p + "attention.kv_lora_rank", s.kv_lora_rank);
  } else if (s.write_head_dims) {
    w.set_u32(p + "attention.key_length", s.head_dim);
    w.set_u32(p + "attention.value_length", s.head_dim);
  }
  w.set_f32(p + "attention.layer_norm_rms_epsilon", s.rms_eps);
  w.set_f32(p + "rope.freq_base", s.rope_base);
  if (s.write_n_rot) w.set_u32(p + "rope.dimension_count", s.n_rot > 0 ? s.n_rot : s.head_dim);
  if (s.n_layer_dense_lead > 0) w.set_u32(p + "leading_dense_block_count", s.n_layer_dense_lead);
  if (s.n_expert_shared > 0) w.set_u32(p + "expert_shared_count", s.n_expert_shared);
  if (s.gating_func > 0) w.set_u32(p + "expert_gating_func", s.gating_func);
  if (s.expert_weights_scale > 0) w.set_f32(p + "expert_weights_scale", s.expert_weights_scale);
  if (s.expert_weights_norm) w.set_bool(p + "expert_weights_norm", true);
  if (s.n_expert_group > 0) {
    w.set_u32(p + "expert_group_count", s.n_expert_group);
    w.set_u32(p + "expert_group_used_count", s.n_expert_group_used);
  }
  if (s.rope_scaling) w.set_string(p + "rope.scaling.type", s.rope_scaling);
  if (s.rope_factor > 0) w.set_f32(p + "rope.scaling.factor", s.rope_factor);
  if (s.rope_orig_ctx > 0) w.set_u32(p + "rope.scaling.original_context_length", s.rope_orig_ctx);
  if (s.yarn_beta_fast > 0) w.set_f32(p + "rope.scaling.yarn_beta_fast", s.yarn_beta_fast);
  if (s.yarn_beta_slow > 0) w.set_f32(p + "rope.scaling.yarn_beta_slow", s.yarn_beta_slow);
  if (s.yarn_log_mul > 0) w.set_f32(p + "rope.scaling.yarn_log_multiplier", s.yarn_log_mul);
  if (s.n_swa > 0) w.set_u32(p + "attention.sliding_window", s.n_swa);
  // A slice has no NextN layer (its last layer would be taken for one).
  if (s.n_nextn > 0 && o.n_layers == 0) w.set_u32(p + "nextn_predict_layers", s.n_nextn);
}

}  // namespace colibri::synth
