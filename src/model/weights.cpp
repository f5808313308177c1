#include "model/weights.h"

#include <cstring>
#include <initializer_list>
#include <vector>

#include "base/error.h"
#include "formats/gguf.h"
#include "tensor/ops.h"

namespace colibri {

namespace {

class Binder {
 public:
  explicit Binder(const GgufFile& f) : f_(f) {}

  // Expected ne (innermost first); a 0 entry accepts any size.
  TensorView get(const std::string& name, std::initializer_list<int64_t> ne, bool required = true,
                 bool f32_only = false) {
    const GgufTensor* t = f_.find_tensor(name);
    if (!t) {
      CLB_CHECK(!required, "%s: tensor %s is missing", f_.name().c_str(), name.c_str());
      return {};
    }
    int want_dims = static_cast<int>(ne.size());
    // Trailing 1-sized dims are equivalent (a (n) vector may be stored as (n, 1)).
    int dims = t->n_dims;
    while (dims > want_dims && t->ne[dims - 1] == 1) --dims;
    CLB_CHECK(dims <= want_dims, "%s: tensor %s: expected %d dims, file has %d", f_.name().c_str(),
              name.c_str(), want_dims, t->n_dims);
    int d = 0;
    for (int64_t want : ne) {
      CLB_CHECK(want == 0 || t->ne[d] == want,
                "%s: tensor %s: expected dimension %d to be %lld, file has %lld (shape %s)",
                f_.name().c_str(), name.c_str(), d, static_cast<long long>(want),
                static_cast<long long>(t->ne[d]), shape(*t).c_str());
      ++d;
    }
    CLB_CHECK(!f32_only || t->type == DType::F32, "%s: tensor %s: expected type f32, file has %s",
              f_.name().c_str(), name.c_str(), dtype_name(t->type));
    used_bytes_ += t->nbytes;
    return f_.view(*t);
  }
  const GgufTensor* raw(const std::string& name) const { return f_.find_tensor(name); }
  const std::string& file_name() const { return f_.name(); }
  uint64_t used_bytes() const { return used_bytes_; }

 private:
  static std::string shape(const GgufTensor& t) {
    std::string s = "[";
    for (int d = 0; d < t.n_dims; ++d) s += strprintf(d ? ", %lld" : "%lld", static_cast<long long>(t.ne[d]));
    return s + "]";
  }
  const GgufFile& f_;
  uint64_t used_bytes_ = 0;
};

std::string blk(int l, const char* what) { return strprintf("blk.%d.%s.weight", l, what); }
std::string blk_bias(int l, const char* what) { return strprintf("blk.%d.%s.bias", l, what); }

// Multi-head latent attention: q through the low-rank path (attn_q_a ->
// norm -> attn_q_b) or plain attn_q, the latent and rope key from
// attn_kv_a_mqa, and the per-head up-projections attn_k_b / attn_v_b.
// Files from older converters carry Hugging Face's kv_b_proj as one
// attn_kv_b: per head, nope rows mapping the latent to keys, then v rows
// mapping it to values (each row kv_lora_rank long). The absorbed form needs
// the key part transposed (attn_k_b: kv_lora_rank rows of nope per head), so
// it is rebuilt here once: F32 when the file is F32 (exact), else F16. The
// value rows are copied as stored (attn_v_b's layout already).
void split_kv_b(const TensorView& kv_b, const ModelConfig& c, LayerWeights& L, ModelWeights& w) {
  const int64_t H = c.n_head, R = c.kv_lora_rank, nope = c.mla_nope, vd = c.mla_v;
  const DType kt = kv_b.type == DType::F32 ? DType::F32 : DType::F16;
  AlignedBuffer<uint8_t> kb(static_cast<size_t>(H) * R * row_bytes(kt, nope));
  AlignedBuffer<uint8_t> vb(static_cast<size_t>(H) * vd * kv_b.row_stride());
  std::vector<float> row(R), col(nope);
  std::vector<float> k_part(static_cast<size_t>(nope) * R);
  for (int64_t h = 0; h < H; ++h) {
    for (int64_t i = 0; i < nope; ++i)
      dequantize_matrix_row(kv_b, h * (nope + vd) + i, k_part.data() + i * R);
    for (int64_t r = 0; r < R; ++r) {
      for (int64_t i = 0; i < nope; ++i) col[i] = k_part[i * R + r];
      uint8_t* dst = kb.data() + (h * R + r) * row_bytes(kt, nope);
      if (kt == DType::F32)
        std::memcpy(dst, col.data(), sizeof(float) * nope);
      else
        fp32_to_fp16_row(col.data(), reinterpret_cast<uint16_t*>(dst), nope);
    }
    std::memcpy(vb.data() + h * vd * kv_b.row_stride(), kv_b.row(h * (nope + vd) + nope), vd * kv_b.row_stride());
  }
  L.wk_b = {kb.data(), kt, {nope, R, H, 1}};
  L.wv_b = {vb.data(), kv_b.type, {R, vd, H, 1}};
  w.derived_bytes += kb.size() + vb.size();
  w.derived.push_back(std::make_shared<AlignedBuffer<uint8_t>>(std::move(kb)));
  w.derived.push_back(std::make_shared<AlignedBuffer<uint8_t>>(std::move(vb)));
}

void bind_latent_attention(Binder& b, const ModelConfig& c, int l, LayerWeights& L, ModelWeights& w) {
  const int64_t E = c.n_embd, H = c.n_head, R = c.kv_lora_rank, rope = c.n_rot;
  const int64_t q_width = H * (c.mla_nope + rope);
  if (c.q_lora_rank > 0 || b.raw(blk(l, "attn_q_a"))) {
    CLB_CHECK(c.q_lora_rank > 0, "%s: tensor %s is present but attention.q_lora_rank is 0", b.file_name().c_str(),
              blk(l, "attn_q_a").c_str());
    L.wq_a = b.get(blk(l, "attn_q_a"), {E, c.q_lora_rank});
    L.q_a_norm = b.get(blk(l, "attn_q_a_norm"), {c.q_lora_rank}, true, true);
    L.wq_b = b.get(blk(l, "attn_q_b"), {c.q_lora_rank, q_width});
  } else {
    L.wq = b.get(blk(l, "attn_q"), {E, q_width});
  }
  L.wkv_a = b.get(blk(l, "attn_kv_a_mqa"), {E, R + rope});
  L.kv_a_norm = b.get(blk(l, "attn_kv_a_norm"), {R}, true, true);
  if (c.mla_legacy_kv_b) {
    split_kv_b(b.get(blk(l, "attn_kv_b"), {R, H * (c.mla_nope + c.mla_v)}), c, L, w);
  } else {
    L.wk_b = b.get(blk(l, "attn_k_b"), {c.mla_nope, R, H});
    L.wv_b = b.get(blk(l, "attn_v_b"), {R, c.mla_v, H});
  }
  L.wo = b.get(blk(l, "attn_output"), {H * c.mla_v, E});
}

}  // namespace

ModelWeights bind_weights(const GgufFile& f, ModelConfig& c) {
  Binder b(f);
  ModelWeights w;
  w.token_embd = b.get("token_embd.weight", {c.n_embd, c.n_vocab ? c.n_vocab : 0});
  if (c.n_vocab == 0) c.n_vocab = static_cast<int>(w.token_embd.ne[1]);
  w.output_norm = b.get("output_norm.weight", {c.n_embd}, true, true);
  w.output = b.get("output.weight", {c.n_embd, c.n_vocab}, false);
  if (!w.output.data) w.output = w.token_embd;  // tied embeddings

  const int64_t E = c.n_embd, nq = c.n_embd_q(), nk = c.n_embd_k(), nv = c.n_embd_v();
  const ArchInfo& a = *c.arch;
  w.layers.resize(c.n_layer);
  w.experts.resize(c.n_layer);
  for (int l = 0; l < c.n_layer; ++l) {
    LayerWeights& L = w.layers[l];
    L.attn_norm = b.get(blk(l, "attn_norm"), {E}, true, true);
    if (c.is_mla()) {
      bind_latent_attention(b, c, l, L, w);
    } else {
      L.wq = b.get(blk(l, "attn_q"), {E, nq});
      L.wk = b.get(blk(l, "attn_k"), {E, nk});
      L.wv = b.get(blk(l, "attn_v"), {E, nv});
      L.wo = b.get(blk(l, "attn_output"), {c.n_head * static_cast<int64_t>(c.head_dim_v), E});
      // Biases: required where the family always has them, taken wherever
      // the file has them (GLM-4.5's q/k/v).
      L.bq = b.get(blk_bias(l, "attn_q"), {nq}, a.attn_bias, true);
      L.bk = b.get(blk_bias(l, "attn_k"), {nk}, a.attn_bias, true);
      L.bv = b.get(blk_bias(l, "attn_v"), {nv}, a.attn_bias, true);
      CLB_CHECK((L.bq.data != nullptr) == (L.bk.data != nullptr) && (L.bk.data != nullptr) == (L.bv.data != nullptr),
                "%s: layer %d: attn_q/k/v biases must come together", f.name().c_str(), l);
      L.bo = b.get(blk_bias(l, "attn_output"), {E}, false, true);
      const bool qk_norm = !a.qk_norm_optional || b.raw(blk(l, "attn_q_norm")) != nullptr;
      if (qk_norm && a.qk_norm == QkNorm::kPerHead) {
        L.q_norm = b.get(blk(l, "attn_q_norm"), {c.head_dim}, true, true);
        L.k_norm = b.get(blk(l, "attn_k_norm"), {c.head_dim}, true, true);
      } else if (qk_norm && a.qk_norm == QkNorm::kFull) {
        L.q_norm = b.get(blk(l, "attn_q_norm"), {nq}, true, true);
        L.k_norm = b.get(blk(l, "attn_k_norm"), {nk}, true, true);
      }
      if (a.attn_sinks) L.sinks = b.get(blk(l, "attn_sinks"), {c.n_head}, true, true);
    }
    L.ffn_norm = b.get(blk(l, a.ffn_norm_name), {E}, true, true);

    // A layer is MoE when the file has its expert stacks (llama files mix
    // both kinds across families); families with leading dense layers have
    // them in every later layer.
    L.moe = c.is_moe() && (c.n_layer_dense_lead > 0 ? l >= c.n_layer_dense_lead
                                                    : b.raw(blk(l, "ffn_gate_exps")) != nullptr);
    if (L.moe) {
      const int64_t X = c.n_expert, F = c.n_ff_exp;
      L.router = b.get(blk(l, "ffn_gate_inp"), {E, X});
      L.router_b = b.get(blk_bias(l, "ffn_gate_inp"), {X}, false, true);
      L.exp_probs_b = b.get(blk_bias(l, "exp_probs_b"), {X}, a.default_gating == Gating::kSigmoid, true);
      ExpertTensors& x = w.experts[l];
      x.gate_exps = b.get(blk(l, "ffn_gate_exps"), {E, F, X});
      x.up_exps = b.get(blk(l, "ffn_up_exps"), {E, F, X});
      x.down_exps = b.get(blk(l, "ffn_down_exps"), {F, E, X});
      x.gate_offset = b.raw(blk(l, "ffn_gate_exps"))->offset;
      x.up_offset = b.raw(blk(l, "ffn_up_exps"))->offset;
      x.down_offset = b.raw(blk(l, "ffn_down_exps"))->offset;
      w.expert_bytes += x.slab_bytes() * X;
      const bool expert_bias = a.expert_activation == ExpertActivation::kSwigluClamped;
      L.gate_exps_b = b.get(blk_bias(l, "ffn_gate_exps"), {F, X}, expert_bias, true);
      L.up_exps_b = b.get(blk_bias(l, "ffn_up_exps"), {F, X}, expert_bias, true);
      L.down_exps_b = b.get(blk_bias(l, "ffn_down_exps"), {E, X}, expert_bias, true);
      if (c.n_ff_shexp > 0) {
        const int64_t S = c.n_ff_shexp;
        L.shexp_gate = b.get(blk(l, "ffn_gate_shexp"), {E, S});
        L.shexp_up = b.get(blk(l, "ffn_up_shexp"), {E, S});
        L.shexp_down = b.get(blk(l, "ffn_down_shexp"), {S, E});
        if (a.shared_expert_gated) L.shexp_gate_inp = b.get(blk(l, "ffn_gate_inp_shexp"), {E}, true, true);
      }
    } else {
      CLB_CHECK(c.n_ff > 0, "%s: layer %d has no expert tensors and feed_forward_length is 0",
                f.name().c_str(), l);
      L.ffn_gate = b.get(blk(l, "ffn_gate"), {E, c.n_ff});
      L.ffn_up = b.get(blk(l, "ffn_up"), {E, c.n_ff});
      L.ffn_down = b.get(blk(l, "ffn_down"), {c.n_ff, E});
    }
  }
  w.dense_bytes = b.used_bytes() - w.expert_bytes;
  return w;
}

}  // namespace colibri
