#include "model/synth.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdio>
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
#include "model/synth_plan.h"
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

using synth::Role;
using synth::TensorPlan;

// Row r of a tensor; see synth.h for the routing modes and the constant
// channel.
class RowMaker {
 public:
  RowMaker(const SynthOptions& o, const TensorPlan& t)
      : o_(o), t_(t), stream_(hash_name(t.name)), channel_(o.routing != SynthRouting::kNatural) {
    if (t.role == Role::kRouter && o.routing == SynthRouting::kZipf) {
      // Expert e's popularity rank in this layer: a seeded shuffle.
      const int X = static_cast<int>(t.ne[1]);
      std::vector<int> order(X);
      std::iota(order.begin(), order.end(), 0);
      RowRng rng(o.seed, hash_name("router-order"), static_cast<uint64_t>(t.layer));
      for (int i = X - 1; i > 0; --i) std::swap(order[i], order[rng.next() % static_cast<uint64_t>(i + 1)]);
      // Channel 0 after RMSNorm: c over the rms of the residual, whose other
      // coordinates have variance 1 (the embedding) to ~1.5 (after the layers).
      const float x0 = kChannel / std::sqrt(1.25f);
      const float beta = 1.0f / std::sqrt(2.0f * std::log(static_cast<float>(std::max(X, 2))));
      bias_.assign(X, 0.f);
      for (int r = 0; r < X; ++r) bias_[order[r]] = -o.router_skew * beta * std::log(r + 1.0f) / x0;
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
      case Role::kOutBias:  // added to the residual: channel 0 stays constant
        random_blocks(DType::F32, rng, 0.5f, dst, n, channel_);
        return;
      case Role::kRouterBias:  // as drawn, or no preference of its own
        if (channel_) std::memset(dst, 0, rb);
        else random_blocks(DType::F32, rng, 0.5f, dst, n);
        return;
      case Role::kExpProbsB:
        if (channel_) std::memset(dst, 0, rb);
        else random_blocks(DType::F32, rng, 0.1f, dst, n);
        return;
      case Role::kSinks:
        random_blocks(DType::F32, rng, 1.0f, dst, n);
        return;
      case Role::kShexpGateInp:
        random_blocks(DType::F32, rng, t_.sigma, dst, n, channel_);
        return;
      case Role::kRouter:  // noise of standard deviation ~1; zipf: column 0 the expert's bias
        random_blocks(DType::F32, rng, t_.sigma, dst, n, channel_);
        if (!bias_.empty()) std::memcpy(dst, &bias_[r], 4);
        return;
      case Role::kEmbd:
        random_blocks(t_.type, rng, 1.0f, dst, n);
        // natural: a massive activation every matrix reads as drawn;
        // uniform, zipf: the constant channel only routers read.
        set_channel(t_.type, channel_ ? kChannel : synth::kMassive * std::sqrt(static_cast<float>(n)), dst);
        return;
      case Role::kAttnOut:
      case Role::kDown:
        if (channel_ && r % t_.ne[1] == 0) {  // output channel 0: the constant channel stays constant
          std::memset(dst, 0, rb);
          return;
        }
        random_blocks(t_.type, rng, t_.sigma, dst, n);
        return;
      case Role::kInner:
        random_blocks(t_.type, rng, t_.sigma, dst, n);
        return;
      default:  // everything that reads the normed residual: q, k, v, q_a, kv_a, gate, up, output
        random_blocks(t_.type, rng, t_.sigma, dst, n, channel_);
    }
  }

 private:
  static constexpr float kOne = 1.0f;
  const SynthOptions& o_;
  const TensorPlan& t_;
  uint64_t stream_;
  bool channel_;             // uniform, zipf: the constant channel is kept apart
  std::vector<float> bias_;  // (n_expert) zipf: router column 0
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

// The header, then a hole up to the file's full size: a sparse file with the
// layout of the real one, written atomically as GgufWriter::write does.
void write_header_and_hole(const GgufWriter& w, const std::string& path) {
  const std::vector<uint8_t> header = w.header();
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  CLB_CHECK(f != nullptr, "%s: cannot create: %s", tmp.c_str(), std::strerror(errno));
  const bool ok = std::fwrite(header.data(), 1, header.size(), f) == header.size() && std::fflush(f) == 0 &&
                  ::ftruncate(::fileno(f), static_cast<off_t>(w.layout().file_size)) == 0;
  const int err = errno;
  const bool closed = std::fclose(f) == 0;
  if (!ok || !closed || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    CLB_CHECK(false, "%s: cannot write: %s", path.c_str(), std::strerror(ok ? errno : err));
  }
}

}  // namespace

SynthSummary write_synth_model(const SynthOptions& o, const std::string& path) {
  const SynthShape& s = o.shape;
  CLB_CHECK(s.n_expert > 0 && s.n_expert_used >= 1 && s.n_expert_used <= s.n_expert,
            "synth: shape %s: expert counts %d/%d are invalid", s.name, s.n_expert, s.n_expert_used);
  CLB_CHECK(o.router_skew >= 0 && o.router_skew <= 16, "synth: router skew %g must be in [0, 16]",
            o.router_skew);
  CLB_CHECK(o.n_layers >= 0 && o.n_layers <= s.n_layer, "synth: shape %s: --layers %d must be between 1 and its %d layers",
            s.name, o.n_layers, s.n_layer);
  CLB_CHECK(!o.vocab_path.empty(), "synth: a vocab file (GGUF with tokenizer.* keys) is required");

  GgufWriter w;
  w.set_string("general.architecture", s.arch);
  w.set_string("general.type", "model");
  w.set_string("general.name", strprintf("synthetic %s %s", s.name, synth_type_name(o.type)));
  w.set_u32("general.file_type", synth::file_type_id(o.type));
  w.set_u32("general.quantization_version", 2);
  synth::write_hparams(w, o);
  w.set_string("synth.shape", s.name);
  if (o.n_layers > 0) w.set_u32("synth.shape_layers", static_cast<uint32_t>(s.n_layer));
  w.set_u64("synth.seed", o.seed);
  w.set_string("synth.routing", synth_routing_name(o.routing));
  if (o.routing == SynthRouting::kZipf) w.set_f32("synth.router_skew", o.router_skew);
  std::string vocab_file = o.vocab_path.substr(o.vocab_path.find_last_of('/') + 1);
  w.set_string("synth.vocab_source", vocab_file);
  SynthSummary sum;
  sum.vocab_note = copy_vocab(w, o.vocab_path, s.n_vocab);

  const std::vector<TensorPlan> plan = synth::plan_tensors(o);
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
  if (o.no_data)
    write_header_and_hole(w, path);
  else
    w.write(path);
  sum.file_bytes = w.layout().file_size;
  sum.n_tensors = static_cast<int>(plan.size());
  sum.params_by_type.assign(by_type.begin(), by_type.end());
  return sum;
}

}  // namespace colibri
