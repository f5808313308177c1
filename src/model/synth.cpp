#include "model/synth.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <map>
#include <numeric>
#include <thread>
#include <unordered_set>

#include "base/error.h"
#include "base/thread_pool.h"
#include "formats/gguf.h"
#include "formats/gguf_writer.h"
#include "model/arch.h"
#include "model/synth_blocks.h"
#include "tensor/half.h"
#include "tensor/quant_blocks.h"

namespace colibri {

namespace {

using synth::RowRng;
using synth::hash_name;
using synth::kChannel;
using synth::mix64;
using synth::random_blocks;
using synth::set_channel;

// From each model's config.json on Hugging Face (allenai/OLMoE-1B-7B-0924,
// Qwen/Qwen3-30B-A3B, mistralai/Mixtral-8x7B-v0.1, Qwen/Qwen1.5-MoE-A2.7B,
// Qwen/Qwen2-57B-A14B). The tiny shapes are a few MB, with widths that are
// multiples of 256 so every K-quant applies.
constexpr SynthShape kShapes[] = {
    // name, arch, layers, n_embd, heads, kv heads, head_dim, vocab, ctx, n_ff,
    // experts, used, n_ff_exp, n_ff_shexp, rms eps, rope base, writes n_ff_exp
    {"olmoe-1b-7b", "olmoe", 16, 2048, 16, 16, 128, 50304, 4096, 1024, 64, 8, 1024, 0, 1e-5f, 1e4f, false},
    {"qwen3-30b-a3b", "qwen3moe", 48, 2048, 32, 4, 128, 151936, 40960, 6144, 128, 8, 768, 0, 1e-6f, 1e6f, true},
    {"mixtral-8x7b", "llama", 32, 4096, 32, 8, 128, 32000, 32768, 14336, 8, 2, 14336, 0, 1e-5f, 1e6f, false},
    {"qwen1.5-moe-a2.7b", "qwen2moe", 24, 2048, 16, 16, 128, 151936, 8192, 5632, 60, 4, 1408, 5632, 1e-6f, 1e6f, true},
    {"qwen2-57b-a14b", "qwen2moe", 28, 3584, 28, 4, 128, 151936, 32768, 18944, 64, 8, 2560, 20480, 1e-6f, 1e6f, true},
    {"tiny", "qwen3moe", 2, 256, 4, 2, 64, 4096, 4096, 512, 8, 2, 256, 0, 1e-6f, 1e6f, true},
    {"tiny-olmoe", "olmoe", 2, 256, 4, 4, 64, 4096, 4096, 256, 8, 2, 256, 0, 1e-5f, 1e4f, false},
    {"tiny-mixtral", "llama", 2, 256, 4, 2, 64, 4096, 4096, 512, 8, 2, 512, 0, 1e-5f, 1e6f, false},
    {"tiny-qwen2moe", "qwen2moe", 2, 256, 4, 2, 64, 4096, 4096, 512, 8, 4, 256, 512, 1e-6f, 1e6f, true},
};

// ---- the tensor plan: names, shapes, types and how each row is made.

enum class Role { kEmbd, kOutput, kNorm, kAttnQ, kAttnK, kAttnV, kAttnOut, kBias, kRouter, kGate, kUp, kDown, kShexpGateInp };

struct TensorPlan {
  std::string name;
  Role role;
  int layer = -1;
  std::vector<int64_t> ne;  // innermost first
  DType type = DType::F32;
  float sigma = 0;
};

bool is_matrix(Role r) {
  return r != Role::kNorm && r != Role::kBias && r != Role::kRouter && r != Role::kShexpGateInp;
}

// llama-quantize's choice for a tensor (llama_tensor_get_type for the file
// types we write): output in Q6_K, more bits for attn_v and ffn_down in the
// first and last eighth of the layers and every third between (Q4_K_M), Q8_0
// attn_k/attn_v in 8-expert models, and the fallbacks for rows that are not a
// multiple of a K-quant's 256.
DType pick_type(const SynthShape& s, SynthType ft, const TensorPlan& t, int n_ffn_down) {
  if (ft == SynthType::kF32 || !is_matrix(t.role)) return DType::F32;
  if (ft == SynthType::kF16) return DType::F16;
  const DType base = ft == SynthType::kQ8_0 ? DType::Q8_0 : ft == SynthType::kQ4_0 ? DType::Q4_0 : DType::Q4_K;
  auto more_bits = [](int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; };
  const bool k_m = ft == SynthType::kQ4_K_M;
  DType type = base;
  switch (t.role) {
    case Role::kOutput:
      type = base == DType::Q8_0 || t.ne[0] % kQK_K ? DType::Q8_0 : DType::Q6_K;
      break;
    case Role::kAttnV:
      if (k_m && more_bits(t.layer, s.n_layer)) type = DType::Q6_K;
      if (s.n_expert == 8) type = DType::Q8_0;
      break;
    case Role::kAttnK:
      if (s.n_expert == 8) type = DType::Q8_0;
      break;
    case Role::kAttnOut:
      if (k_m && s.n_expert == 8) type = DType::Q5_K;
      break;
    case Role::kDown:
      if (k_m && more_bits(t.layer, n_ffn_down)) type = DType::Q6_K;
      break;
    default:
      break;
  }
  if (t.ne[0] % dtype_info(type).block_size != 0) {
    type = type == DType::Q4_K ? DType::Q5_0 : type == DType::Q5_K ? DType::Q5_1 : type == DType::Q6_K ? DType::Q8_0 : type;
    if (t.ne[0] % dtype_info(type).block_size != 0) type = DType::F16;
  }
  return type;
}

std::vector<TensorPlan> plan_tensors(const SynthShape& s, SynthType ft) {
  const ArchInfo* a = find_arch(s.arch);
  CLB_CHECK(a != nullptr, "synth: shape %s: architecture %s is not supported", s.name, s.arch);
  const int64_t E = s.n_embd, V = s.n_vocab, X = s.n_expert, F = s.n_ff_exp, S = s.n_ff_shexp;
  const int64_t nq = int64_t{s.n_head} * s.head_dim, nk = int64_t{s.n_head_kv} * s.head_dim;
  const float resid = 1.0f / std::sqrt(2.0f * s.n_layer);
  std::vector<TensorPlan> p;
  auto add = [&](std::string name, Role role, int layer, std::vector<int64_t> ne, float scale = 1.0f) {
    float sigma = scale / std::sqrt(static_cast<float>(ne[0]));
    p.push_back({std::move(name), role, layer, std::move(ne), DType::F32, sigma});
  };
  add("token_embd.weight", Role::kEmbd, -1, {E, V}, std::sqrt(static_cast<float>(E)));  // N(0, 1)
  add("output_norm.weight", Role::kNorm, -1, {E});
  // Logits of standard deviation ~4, so greedy margins are like a real model's.
  add("output.weight", Role::kOutput, -1, {E, V}, 4.0f);
  for (int l = 0; l < s.n_layer; ++l) {
    auto n = [l](const char* what, const char* kind = "weight") {
      return strprintf("blk.%d.%s.%s", l, what, kind);
    };
    add(n("attn_norm"), Role::kNorm, l, {E});
    add(n("attn_q"), Role::kAttnQ, l, {E, nq});
    add(n("attn_k"), Role::kAttnK, l, {E, nk});
    add(n("attn_v"), Role::kAttnV, l, {E, nk});
    add(n("attn_output"), Role::kAttnOut, l, {nq, E}, resid);
    if (a->attn_bias) {
      add(n("attn_q", "bias"), Role::kBias, l, {nq});
      add(n("attn_k", "bias"), Role::kBias, l, {nk});
      add(n("attn_v", "bias"), Role::kBias, l, {nk});
    }
    if (a->qk_norm == QkNorm::kPerHead) {
      add(n("attn_q_norm"), Role::kNorm, l, {s.head_dim});
      add(n("attn_k_norm"), Role::kNorm, l, {s.head_dim});
    } else if (a->qk_norm == QkNorm::kFull) {
      add(n("attn_q_norm"), Role::kNorm, l, {nq});
      add(n("attn_k_norm"), Role::kNorm, l, {nk});
    }
    add(n("ffn_norm"), Role::kNorm, l, {E});
    add(n("ffn_gate_inp"), Role::kRouter, l, {E, X});
    add(n("ffn_gate_exps"), Role::kGate, l, {E, F, X});
    add(n("ffn_up_exps"), Role::kUp, l, {E, F, X});
    add(n("ffn_down_exps"), Role::kDown, l, {F, E, X}, resid);
    if (S > 0) {
      if (a->shared_expert_gated) add(n("ffn_gate_inp_shexp"), Role::kShexpGateInp, l, {E});
      add(n("ffn_gate_shexp"), Role::kGate, l, {E, S});
      add(n("ffn_up_shexp"), Role::kUp, l, {E, S});
      add(n("ffn_down_shexp"), Role::kDown, l, {S, E}, resid);
    }
  }
  int n_ffn_down = 0;
  for (const TensorPlan& t : p) n_ffn_down += t.role == Role::kDown;
  for (TensorPlan& t : p) t.type = pick_type(s, ft, t, n_ffn_down);
  return p;
}

// Row r of a tensor; see synth.h for the constant channel and the router.
class RowMaker {
 public:
  RowMaker(const SynthOptions& o, const TensorPlan& t) : o_(o), t_(t), stream_(hash_name(t.name)) {
    if (t.role == Role::kRouter) {
      // Expert e's popularity rank in this layer: a seeded shuffle.
      const int X = static_cast<int>(t.ne[1]);
      std::vector<int> order(X);
      std::iota(order.begin(), order.end(), 0);
      RowRng rng(o.seed, hash_name("router-order"), static_cast<uint64_t>(t.layer));
      for (int i = X - 1; i > 0; --i) std::swap(order[i], order[rng.next() % static_cast<uint64_t>(i + 1)]);
      const float E = static_cast<float>(t.ne[0]);
      // Channel 0 after RMSNorm: c over the rms of the residual, whose other
      // coordinates have variance 1 (the embedding) to ~1.5 (after the layers).
      const float x0 = kChannel / std::sqrt(1.25f);
      const float beta = 1.0f / std::sqrt(2.0f * std::log(static_cast<float>(std::max(X, 2))));
      bias_.assign(X, 0.f);
      for (int r = 0; r < X; ++r)
        bias_[order[r]] = -o.router_skew * beta * std::log(r + 1.0f) / x0;
      router_sigma_ = 1.0f / std::sqrt(E);  // noise of standard deviation ~1
    }
  }

  void row(int64_t r, uint8_t* dst) const {
    const int64_t n = t_.ne[0];
    const size_t rb = row_bytes(t_.type, n);
    RowRng rng(o_.seed, stream_, static_cast<uint64_t>(r));
    switch (t_.role) {
      case Role::kNorm:
        for (int64_t i = 0; i < n; ++i) std::memcpy(dst + 4 * i, &kOne, 4);
        return;
      case Role::kBias:
        random_blocks(DType::F32, rng, 0.5f, dst, n);
        return;
      case Role::kShexpGateInp:
        random_blocks(DType::F32, rng, t_.sigma, dst, n, true);
        return;
      case Role::kRouter: {
        random_blocks(DType::F32, rng, router_sigma_, dst, n);
        std::memcpy(dst, &bias_[r], 4);
        return;
      }
      case Role::kEmbd: {
        random_blocks(t_.type, rng, 1.0f, dst, n);
        set_channel(t_.type, kChannel, dst);
        return;
      }
      case Role::kAttnOut:
      case Role::kDown:
        if (r % t_.ne[1] == 0) {  // output channel 0: the constant channel stays constant
          std::memset(dst, 0, rb);
          return;
        }
        random_blocks(t_.type, rng, t_.sigma, dst, n);
        return;
      default:  // everything that reads the normed residual: q, k, v, gate, up, output
        random_blocks(t_.type, rng, t_.sigma, dst, n, true);
    }
  }

 private:
  static constexpr float kOne = 1.0f;
  const SynthOptions& o_;
  const TensorPlan& t_;
  uint64_t stream_;
  std::vector<float> bias_;  // (n_expert) router column 0
  float router_sigma_ = 0;
};

// ---- the tokenizer, copied from a vocab file and fitted to n_vocab.

bool is_special_id_key(const std::string& k) {
  return k.starts_with("tokenizer.ggml.") && k.ends_with("_token_id");
}

std::string copy_vocab(GgufWriter& w, const std::string& path, int n_vocab) {
  auto f = GgufFile::open(path);
  const auto* tokens = f->get_string_array("tokenizer.ggml.tokens");
  CLB_CHECK(tokens != nullptr, "%s: no tokenizer.ggml.tokens: not a vocab file", path.c_str());
  const int n_src = static_cast<int>(tokens->size());
  if (n_src == n_vocab) {
    for (const GgufKV& kv : f->metadata())
      if (kv.key.starts_with("tokenizer.")) w.set_value(kv.key, kv.value);
    return strprintf("%d tokens, as in the file", n_vocab);
  }
  std::optional<std::vector<int64_t>> types = f->get_int_array("tokenizer.ggml.token_type");
  std::optional<std::vector<float>> scores = f->get_f32_array("tokenizer.ggml.scores");

  // map[new id] = old id (-1: a padding token).
  std::vector<int> map(n_vocab, -1);
  std::map<int64_t, int> renumbered;  // old special id beyond the cut -> new id
  if (n_src > n_vocab) {
    for (const GgufKV& kv : f->metadata())
      if (is_special_id_key(kv.key) && kv.value.is_integer() && static_cast<int64_t>(kv.value.u) >= n_vocab &&
          static_cast<int64_t>(kv.value.u) < n_src)
        renumbered[static_cast<int64_t>(kv.value.u)] = 0;
    CLB_CHECK(renumbered.size() < static_cast<size_t>(n_vocab), "%s: too many special tokens to fit %d", path.c_str(), n_vocab);
    const int keep = n_vocab - static_cast<int>(renumbered.size());
    for (int i = 0; i < keep; ++i) map[i] = i;
    int next = keep;
    for (auto& [old_id, new_id] : renumbered) {
      new_id = next;
      map[next++] = static_cast<int>(old_id);
    }
  } else {
    for (int i = 0; i < n_src; ++i) map[i] = i;
  }

  std::vector<std::string> new_tokens(n_vocab);
  std::vector<int32_t> new_types(n_vocab);
  std::vector<float> new_scores(n_vocab);
  for (int i = 0; i < n_vocab; ++i) {
    if (map[i] < 0) {
      new_tokens[i] = strprintf("[PAD%d]", i);
      new_types[i] = 5;  // unused
      continue;
    }
    new_tokens[i] = std::string((*tokens)[map[i]]);
    new_types[i] = types ? static_cast<int32_t>((*types)[map[i]]) : 1;
    new_scores[i] = scores ? (*scores)[map[i]] : 0.f;
  }
  std::unordered_set<std::string_view> kept(new_tokens.begin(), new_tokens.end());
  size_t n_merges_dropped = 0;
  for (const GgufKV& kv : f->metadata()) {
    const std::string& k = kv.key;
    if (!k.starts_with("tokenizer.")) continue;
    if (k == "tokenizer.ggml.tokens") {
      w.set_array_str(k, new_tokens);
    } else if (k == "tokenizer.ggml.token_type") {
      w.set_array_i32(k, new_types);
    } else if (k == "tokenizer.ggml.scores") {
      w.set_array_f32(k, new_scores);
    } else if (k == "tokenizer.ggml.merges" && n_src > n_vocab) {
      std::vector<std::string> merges;
      for (std::string_view m : kv.value.strs) {
        size_t sp = m.find(' ', 1);
        bool ok = sp != std::string_view::npos && kept.count(m.substr(0, sp)) && kept.count(m.substr(sp + 1)) &&
                  kept.count(std::string(m.substr(0, sp)) + std::string(m.substr(sp + 1)));
        if (ok) merges.emplace_back(m);
      }
      n_merges_dropped = kv.value.strs.size() - merges.size();
      w.set_array_str(k, merges);
    } else if (is_special_id_key(k) && kv.value.is_integer() && renumbered.count(static_cast<int64_t>(kv.value.u))) {
      w.set_u32(k, static_cast<uint32_t>(renumbered[static_cast<int64_t>(kv.value.u)]));
    } else {
      w.set_value(k, kv.value);
    }
  }
  if (n_src > n_vocab)
    return strprintf("cut from %d to %d tokens (%zu special ids moved to the end, %zu merges dropped)", n_src,
                     n_vocab, renumbered.size(), n_merges_dropped);
  return strprintf("padded from %d to %d tokens with unused [PAD] tokens", n_src, n_vocab);
}

uint32_t file_type_id(SynthType t) {  // llama_ftype
  switch (t) {
    case SynthType::kF32: return 0;
    case SynthType::kF16: return 1;
    case SynthType::kQ4_0: return 2;
    case SynthType::kQ8_0: return 7;
    case SynthType::kQ4_K_M: return 15;
  }
  return 0;
}

void write_hparams(GgufWriter& w, const SynthShape& s) {
  const std::string p = std::string(s.arch) + ".";
  w.set_u32(p + "vocab_size", s.n_vocab);
  w.set_u32(p + "context_length", s.n_ctx_train);
  w.set_u32(p + "embedding_length", s.n_embd);
  w.set_u32(p + "block_count", s.n_layer);
  w.set_u32(p + "feed_forward_length", s.n_ff);
  if (s.write_n_ff_exp) w.set_u32(p + "expert_feed_forward_length", s.n_ff_exp);
  if (s.n_ff_shexp) w.set_u32(p + "expert_shared_feed_forward_length", s.n_ff_shexp);
  w.set_u32(p + "expert_count", s.n_expert);
  w.set_u32(p + "expert_used_count", s.n_expert_used);
  w.set_u32(p + "attention.head_count", s.n_head);
  w.set_u32(p + "attention.head_count_kv", s.n_head_kv);
  w.set_u32(p + "attention.key_length", s.head_dim);
  w.set_u32(p + "attention.value_length", s.head_dim);
  w.set_f32(p + "attention.layer_norm_rms_epsilon", s.rms_eps);
  w.set_f32(p + "rope.freq_base", s.rope_base);
  w.set_u32(p + "rope.dimension_count", s.head_dim);
}

}  // namespace

const SynthShape* find_synth_shape(std::string_view name) {
  for (const SynthShape& s : kShapes)
    if (name == s.name) return &s;
  return nullptr;
}

std::string synth_shape_names() {
  std::string r;
  for (const SynthShape& s : kShapes) r += (r.empty() ? "" : ", ") + std::string(s.name);
  return r;
}

std::optional<SynthType> parse_synth_type(std::string_view name) {
  for (SynthType t : {SynthType::kF32, SynthType::kF16, SynthType::kQ8_0, SynthType::kQ4_0, SynthType::kQ4_K_M})
    if (name == synth_type_name(t)) return t;
  return std::nullopt;
}

const char* synth_type_name(SynthType t) {
  switch (t) {
    case SynthType::kF32: return "f32";
    case SynthType::kF16: return "f16";
    case SynthType::kQ8_0: return "q8_0";
    case SynthType::kQ4_0: return "q4_0";
    case SynthType::kQ4_K_M: return "q4_k_m";
  }
  return "?";
}

SynthSummary write_synth_model(const SynthOptions& o, const std::string& path) {
  const SynthShape& s = o.shape;
  CLB_CHECK(s.n_expert > 0 && s.n_expert_used >= 1 && s.n_expert_used <= s.n_expert,
            "synth: shape %s: expert counts %d/%d are invalid", s.name, s.n_expert, s.n_expert_used);
  CLB_CHECK(o.router_skew >= 0 && o.router_skew <= 16, "synth: router skew %g must be in [0, 16]",
            o.router_skew);
  CLB_CHECK(!o.vocab_path.empty(), "synth: a vocab file (GGUF with tokenizer.* keys) is required");

  GgufWriter w;
  w.set_string("general.architecture", s.arch);
  w.set_string("general.type", "model");
  w.set_string("general.name", strprintf("synthetic %s %s", s.name, synth_type_name(o.type)));
  w.set_u32("general.file_type", file_type_id(o.type));
  w.set_u32("general.quantization_version", 2);
  write_hparams(w, s);
  w.set_string("synth.shape", s.name);
  w.set_u64("synth.seed", o.seed);
  w.set_f32("synth.router_skew", o.router_skew);
  std::string vocab_file = o.vocab_path.substr(o.vocab_path.find_last_of('/') + 1);
  w.set_string("synth.vocab_source", vocab_file);
  SynthSummary sum;
  sum.vocab_note = copy_vocab(w, o.vocab_path, s.n_vocab);

  const std::vector<TensorPlan> plan = plan_tensors(s, o.type);
  const int threads = o.n_threads > 0 ? o.n_threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  ThreadPool pool(threads);
  uint64_t total = 0;
  std::map<std::string, uint64_t> by_type;
  for (const TensorPlan& t : plan) {
    int64_t n_el = 1;
    for (int64_t d : t.ne) n_el *= d;
    total += row_bytes(t.type, t.ne[0]) * static_cast<uint64_t>(n_el / t.ne[0]);
    by_type[dtype_name(t.type)] += static_cast<uint64_t>(n_el);
    sum.n_params += static_cast<uint64_t>(n_el);
  }
  std::vector<std::unique_ptr<RowMaker>> makers;
  std::atomic<uint64_t> done{0};
  for (const TensorPlan& t : plan) {
    makers.push_back(std::make_unique<RowMaker>(o, t));
    const RowMaker* m = makers.back().get();
    const size_t rb = row_bytes(t.type, t.ne[0]);
    w.add_tensor_info(t.name, t.type, t.ne, [&, m, rb](int64_t row0, int64_t n_rows, uint8_t* dst) {
      pool.parallel_for(n_rows, 1, [&](int64_t b, int64_t e, int) {
        for (int64_t r = b; r < e; ++r) m->row(row0 + r, dst + static_cast<size_t>(r) * rb);
      });
      done += static_cast<uint64_t>(n_rows) * rb;
      if (o.progress) o.progress(done, total);
    });
  }
  w.write(path);
  sum.file_bytes = w.layout().file_size;
  sum.n_tensors = static_cast<int>(plan.size());
  sum.params_by_type.assign(by_type.begin(), by_type.end());
  return sum;
}

}  // namespace colibri
