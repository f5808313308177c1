#include "model/weights.h"

#include <initializer_list>

#include "base/error.h"
#include "formats/gguf.h"

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
    L.wq = b.get(blk(l, "attn_q"), {E, nq});
    L.wk = b.get(blk(l, "attn_k"), {E, nk});
    L.wv = b.get(blk(l, "attn_v"), {E, nv});
    L.wo = b.get(blk(l, "attn_output"), {c.n_head * static_cast<int64_t>(c.head_dim_v), E});
    if (a.attn_bias) {
      L.bq = b.get(blk_bias(l, "attn_q"), {nq}, true, true);
      L.bk = b.get(blk_bias(l, "attn_k"), {nk}, true, true);
      L.bv = b.get(blk_bias(l, "attn_v"), {nv}, true, true);
    }
    if (a.qk_norm == QkNorm::kPerHead) {
      L.q_norm = b.get(blk(l, "attn_q_norm"), {c.head_dim}, true, true);
      L.k_norm = b.get(blk(l, "attn_k_norm"), {c.head_dim}, true, true);
    } else if (a.qk_norm == QkNorm::kFull) {
      L.q_norm = b.get(blk(l, "attn_q_norm"), {nq}, true, true);
      L.k_norm = b.get(blk(l, "attn_k_norm"), {nk}, true, true);
    }
    L.ffn_norm = b.get(blk(l, "ffn_norm"), {E}, true, true);

    // A layer is MoE when the file has its expert stacks (llama files mix
    // both kinds across families; the config says how many experts).
    L.moe = c.is_moe() && b.raw(blk(l, "ffn_gate_exps")) != nullptr;
    if (L.moe) {
      const int64_t X = c.n_expert, F = c.n_ff_exp;
      L.router = b.get(blk(l, "ffn_gate_inp"), {E, X});
      ExpertTensors& x = w.experts[l];
      x.gate_exps = b.get(blk(l, "ffn_gate_exps"), {E, F, X});
      x.up_exps = b.get(blk(l, "ffn_up_exps"), {E, F, X});
      x.down_exps = b.get(blk(l, "ffn_down_exps"), {F, E, X});
      CLB_CHECK(x.gate_exps.type == x.up_exps.type,
                "%s: layer %d: ffn_gate_exps (%s) and ffn_up_exps (%s) must share a type",
                f.name().c_str(), l, dtype_name(x.gate_exps.type), dtype_name(x.up_exps.type));
      x.gate_offset = b.raw(blk(l, "ffn_gate_exps"))->offset;
      x.up_offset = b.raw(blk(l, "ffn_up_exps"))->offset;
      x.down_offset = b.raw(blk(l, "ffn_down_exps"))->offset;
      w.expert_bytes += x.slab_bytes() * X;
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
