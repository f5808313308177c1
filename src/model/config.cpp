#include "model/config.h"

#include "base/error.h"
#include "formats/gguf.h"

namespace colibri {

namespace {

// Upper bounds that no real model reaches; they keep a hostile file from
// sizing buffers from absurd numbers. A real limit, checked and reported.
constexpr uint64_t kMaxLayers = 1024;
constexpr uint64_t kMaxWidth = 1 << 20;
constexpr uint64_t kMaxExperts = 4096;

int get_int(const GgufFile& f, const std::string& key, uint64_t max, std::optional<uint64_t> dflt) {
  std::optional<uint64_t> v = f.get_uint(key);
  if (!v) {
    CLB_CHECK(dflt.has_value(), "%s: required key %s is missing", f.name().c_str(), key.c_str());
    v = dflt;
  }
  CLB_CHECK(*v <= max, "%s: key %s: value %llu exceeds the limit %llu", f.name().c_str(),
            key.c_str(), static_cast<unsigned long long>(*v), static_cast<unsigned long long>(max));
  return static_cast<int>(*v);
}

}  // namespace

ModelConfig ModelConfig::from_gguf(const GgufFile& f) {
  ModelConfig c;
  std::string arch(f.require_string("general.architecture"));
  c.arch = find_arch(arch);
  CLB_CHECK(c.arch != nullptr, "%s: architecture '%s' is not supported (supported: %s)",
            f.name().c_str(), arch.c_str(), supported_arch_names());
  const std::string p = arch + ".";
  c.n_layer = get_int(f, p + "block_count", kMaxLayers, std::nullopt);
  c.n_embd = get_int(f, p + "embedding_length", kMaxWidth, std::nullopt);
  c.n_head = get_int(f, p + "attention.head_count", kMaxWidth, std::nullopt);
  CLB_CHECK(c.n_layer > 0 && c.n_embd > 0 && c.n_head > 0,
            "%s: block_count, embedding_length and head_count must be positive", f.name().c_str());
  c.n_head_kv = get_int(f, p + "attention.head_count_kv", kMaxWidth, c.n_head);
  CLB_CHECK(c.n_head_kv > 0 && c.n_head % c.n_head_kv == 0,
            "%s: key %sattention.head_count_kv: %d does not divide head_count %d", f.name().c_str(),
            p.c_str(), c.n_head_kv, c.n_head);
  c.head_dim = get_int(f, p + "attention.key_length", kMaxWidth, c.n_embd / c.n_head);
  c.head_dim_v = get_int(f, p + "attention.value_length", kMaxWidth, c.head_dim);
  CLB_CHECK(c.head_dim > 0 && c.head_dim % 2 == 0 && c.head_dim_v > 0,
            "%s: head dimension %d must be positive and even", f.name().c_str(), c.head_dim);
  c.n_rot = get_int(f, p + "rope.dimension_count", kMaxWidth, c.head_dim);
  CLB_CHECK(c.n_rot > 0 && c.n_rot <= c.head_dim && c.n_rot % 2 == 0,
            "%s: key %srope.dimension_count: %d must be even and at most head dim %d",
            f.name().c_str(), p.c_str(), c.n_rot, c.head_dim);
  c.n_ctx_train = get_int(f, p + "context_length", 1 << 24, 4096);
  c.n_ff = get_int(f, p + "feed_forward_length", kMaxWidth, 0);
  c.n_expert = get_int(f, p + "expert_count", kMaxExperts, 0);
  c.n_expert_used = get_int(f, p + "expert_used_count", kMaxExperts, 0);
  if (c.n_expert > 0) {
    CLB_CHECK(c.n_expert_used >= 1 && c.n_expert_used <= c.n_expert,
              "%s: key %sexpert_used_count: %d must be between 1 and expert_count %d",
              f.name().c_str(), p.c_str(), c.n_expert_used, c.n_expert);
    // Mixtral-style llama files carry only feed_forward_length.
    c.n_ff_exp = get_int(f, p + "expert_feed_forward_length", kMaxWidth, c.n_ff);
  }
  c.n_ff_shexp = get_int(f, p + "expert_shared_feed_forward_length", kMaxWidth, 0);
  c.rms_eps = static_cast<float>(
      f.get_float(p + "attention.layer_norm_rms_epsilon").value_or(c.arch->default_rms_eps));
  c.rope_base =
      static_cast<float>(f.get_float(p + "rope.freq_base").value_or(c.arch->default_rope_base));
  CLB_CHECK(c.rms_eps > 0 && c.rms_eps < 1, "%s: rms epsilon %g is out of range", f.name().c_str(),
            c.rms_eps);
  CLB_CHECK(c.rope_base > 1, "%s: rope.freq_base %g is out of range", f.name().c_str(),
            c.rope_base);
  c.n_vocab = get_int(f, p + "vocab_size", 1 << 24, 0);
  return c;
}

std::string ModelConfig::describe() const {
  std::string s = strprintf(
      "%s: %d layers, n_embd %d, heads %d/%d x %d, n_vocab %d, ctx %d", std::string(arch->name).c_str(),
      n_layer, n_embd, n_head, n_head_kv, head_dim, n_vocab, n_ctx_train);
  if (is_moe())
    s += strprintf(", %d experts (%d used) x n_ff_exp %d", n_expert, n_expert_used, n_ff_exp);
  else
    s += strprintf(", dense n_ff %d", n_ff);
  if (n_ff_shexp) s += strprintf(", shared expert %d", n_ff_shexp);
  return s;
}

}  // namespace colibri
