#include "moe/placement.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <numeric>

#include "base/error.h"
#include "base/sys.h"
#include "formats/gguf.h"
#include "model/config.h"
#include "model/weights.h"
#include "moe/dense_arena.h"
#include "moe/history.h"
#include "moe/streaming_store.h"

namespace colibri {

namespace {


uint64_t read_u64_file(const std::string& path) {
  std::ifstream in(path);
  std::string s;
  if (!(in >> s) || s == "max") return 0;
  char* end = nullptr;
  unsigned long long v = std::strtoull(s.c_str(), &end, 10);
  return *end ? 0 : v;
}

// The cgroup path of `controller` ("memory" for v1, "" for the v2 line "0::").
std::string cgroup_path(const std::string& controller) {
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  while (std::getline(in, line)) {
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string ctrls = line.substr(a + 1, b - a - 1);
    bool match = controller.empty() ? ctrls.empty() : false;
    for (size_t i = 0; !controller.empty() && i <= ctrls.size();) {
      size_t j = ctrls.find(',', i);
      if (j == std::string::npos) j = ctrls.size();
      match |= ctrls.substr(i, j - i) == controller;
      i = j + 1;
    }
    if (match) return line.substr(b + 1);
  }
  return "";
}

// Pieces of the budget that do not depend on the slot count.
struct Shape {
  int n_moe_layers = 0;
  uint64_t slab_bytes = 0;
  uint64_t max_part_bytes = 0;
  std::vector<uint64_t> layer_slab;  // (n_layer) slab bytes, 0 in dense layers
};

Shape model_shape(const ModelWeights& w, bool o_direct) {
  Shape s;
  s.layer_slab.assign(w.experts.size(), 0);
  for (size_t l = 0; l < w.experts.size(); ++l) {
    const ExpertTensors& t = w.experts[l];
    if (!t.gate_exps.data) continue;
    ++s.n_moe_layers;
    s.layer_slab[l] = t.slab_bytes();
    for (const TensorView* v : {&t.gate_exps, &t.up_exps, &t.down_exps})
      s.max_part_bytes = std::max<uint64_t>(s.max_part_bytes, v->slab_bytes());
  }
  s.slab_bytes = StreamingExpertStore::slot_bytes(w.experts, o_direct);
  return s;
}

}  // namespace

uint64_t parse_size(const std::string& text) {
  std::string s;
  for (char c : text)
    if (!std::isspace(static_cast<unsigned char>(c))) s += static_cast<char>(std::tolower(c));
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  std::string unit(end ? end : "");
  if (!unit.empty() && unit.back() == 'b') unit.pop_back();
  if (unit.size() == 2 && unit[1] == 'i') unit.pop_back();
  double mul = 0;
  if (unit.empty()) mul = 1;
  else if (unit == "k") mul = 1024.0;
  else if (unit == "m") mul = 1024.0 * 1024;
  else if (unit == "g") mul = 1024.0 * 1024 * 1024;
  else if (unit == "t") mul = 1024.0 * 1024 * 1024 * 1024;
  CLB_CHECK(end != s.c_str() && mul > 0 && v >= 0 && std::isfinite(v) && v * mul < 1.8e19,
            "cannot read '%s' as a size (examples: 4G, 512M, 2.5GiB, 100000)", text.c_str());
  return static_cast<uint64_t>(v * mul);
}

std::string format_size(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  return strprintf(u ? "%.2f %s" : "%.0f %s", bytes, units[u]);
}

uint64_t detect_memory_limit(std::string* source) {
  uint64_t best = 0;
  auto consider = [&](uint64_t v, const char* what) {
    // cgroup v1 reports "no limit" as a huge page-rounded number.
    if (v == 0 || v >= (1ull << 60)) return;
    if (best == 0 || v < best) {
      best = v;
      if (source) *source = strprintf("%s %s", what, format_size(static_cast<double>(v)).c_str());
    }
  };
  const std::string v1 = cgroup_path("memory");
  if (!v1.empty()) consider(read_u64_file("/sys/fs/cgroup/memory" + v1 + "/memory.limit_in_bytes"), "cgroup v1 limit");
  const std::string v2 = cgroup_path("");
  if (!v2.empty()) {
    consider(read_u64_file("/sys/fs/cgroup" + v2 + "/memory.max"), "cgroup v2 memory.max");
    consider(read_u64_file("/sys/fs/cgroup/unified" + v2 + "/memory.max"), "cgroup v2 memory.max");
  }
  std::ifstream mi("/proc/meminfo");
  std::string key;
  uint64_t kb = 0;
  while (mi >> key >> kb) {
    if (key == "MemAvailable:") {
      consider(kb * 1024, "MemAvailable");
      break;
    }
    mi.ignore(256, '\n');
  }
  CLB_CHECK(best > 0, "cannot tell how much memory is available; give a budget with --mem");
  return best;
}

uint64_t kv_cache_bytes_per_token(const ModelConfig& c, DType kv_type) {
  // A row per KV head, layer and token; MLA caches one latent row whose
  // first values are the values.
  const uint64_t kv_row = row_bytes(kv_type, c.head_dim) + (c.is_mla() ? 0 : row_bytes(kv_type, c.head_dim_v));
  return kv_row * c.n_layer * c.n_head_kv;
}

uint64_t kv_cache_bytes(const ModelConfig& c, int n_ctx, int n_seq, DType kv_type) {
  return kv_cache_bytes_per_token(c, kv_type) * static_cast<uint64_t>(n_seq) * static_cast<uint64_t>(n_ctx);
}

uint64_t runtime_bytes_estimate(const ModelConfig& c, int n_ctx, int n_batch, int n_seq,
                                int n_threads, DType kv_type) {
  return kv_cache_bytes(c, n_ctx, n_seq, kv_type) + scratch_bytes_estimate(c, n_ctx, n_batch, n_threads);
}

uint64_t scratch_bytes_estimate(const ModelConfig& c, int n_ctx, int n_batch, int n_threads) {
  const uint64_t k = std::max(c.n_expert_used, 1);
  const uint64_t n_ff_max = std::max({c.n_ff, c.n_ff_exp, c.n_ff_shexp, 1});
  const uint64_t max_in = std::max<uint64_t>({static_cast<uint64_t>(c.n_embd),
                                              static_cast<uint64_t>(c.n_head) * c.head_dim_v, n_ff_max});
  // Per batch row: residual, normed input, block output, gathered input,
  // q/k/v, attention output, gate/up, k expert outputs, router logits, and
  // the activations in a kernel's type (at most 4 bytes each).
  const uint64_t per_row = 4 * (4ull * c.n_embd + c.n_embd_q() + c.n_embd_k() + c.n_embd_v() +
                                static_cast<uint64_t>(c.n_head) * c.head_dim_v + 2 * n_ff_max +
                                k * c.n_embd + std::max(c.n_expert, 1) + 4 * k + c.n_rot) +
                           4 * (max_in + 256);
  // Per thread: attention scores for a block of queries over the context,
  // and a row of scratch.
  const uint64_t per_thread = 4 * (static_cast<uint64_t>(kAttentionQueryBlock) * n_ctx + max_in + 256);
  // Per thread and batch row: a packed kernel's preparation of a product's
  // input, every token's kept through the job (kernels/x86/avx512_packed.cpp:
  // 8 bytes per block of 32 elements), one array per weight type, of which
  // a file mixes three at most.
  const uint64_t prep_per_row = 3 * 8 * (max_in / 32 + 1);
  return per_row * n_batch + (per_thread + prep_per_row * n_batch) * n_threads + 4ull * c.n_vocab;
}

Plan make_plan(const ExpertStoreOptions& o, const GgufFile& f, const ModelConfig& cfg,
               const ModelWeights& w, uint64_t other_bytes, uint64_t kv_bytes, DType kv_type) {
  Plan p;
  p.policy = o.policy;
  p.io = o.io;
  p.o_direct = o.o_direct;
  p.prefetch = o.prefetch;
  p.prefetch_top = o.prefetch_top;
  p.n_expert = cfg.n_expert;
  p.n_expert_used = cfg.n_expert_used;
  p.other_bytes = other_bytes;
  p.kv_bytes = kv_bytes;
  p.kv_type = kv_type;
  p.kv_bytes_per_token = kv_cache_bytes_per_token(cfg, kv_type);
  p.dense_bytes = DenseArena::bytes_needed(f, w) + w.derived_bytes;
  const Shape shape = model_shape(w, o.o_direct);
  p.n_moe_layers = shape.n_moe_layers;
  p.slab_bytes = shape.slab_bytes;
  p.expert_bytes = w.expert_bytes;
  const uint64_t page = page_size();
  p.metadata_bytes = (f.data_offset() + page - 1) / page * page;
  // Buffered reads pass through the page cache until their op completes.
  const uint64_t depth = o.io == "pread" ? std::min(o.io_depth, 16) : o.io_depth;
  p.inflight_bytes = o.o_direct ? 0 : depth * shape.max_part_bytes;
  p.fixed_overhead = kProcessOverheadBytes + p.metadata_bytes + p.inflight_bytes;

  if (o.mem_budget > 0) {
    p.budget = o.mem_budget;
    p.budget_source = "--mem";
  } else if (o.slots_per_layer > 0) {
    p.budget_source = "none: a fixed slot count";
  } else {
    std::string src;
    const uint64_t limit = detect_memory_limit(&src);
    CLB_CHECK(limit > p.fixed_overhead,
              "%s is less than the fixed overhead of %s; give a budget with --mem", src.c_str(),
              format_size(static_cast<double>(p.fixed_overhead)).c_str());
    p.budget = limit - p.fixed_overhead;
    p.budget_source = src + " less the fixed overhead";
  }

  const uint64_t total_experts = static_cast<uint64_t>(p.n_moe_layers) * std::max(cfg.n_expert, 0);
  // When the budget cannot hold every expert, the token embeddings stay in
  // the file (a token reads one row) and their room goes to expert slots.
  if (total_experts > 0 && p.budget > 0 && o.slots_per_layer == 0 &&
      DenseArena::embeddings_can_stay_in_file(w) &&
      p.dense_bytes + other_bytes + kv_bytes + total_experts * p.slab_bytes > p.budget) {
    const uint64_t without = DenseArena::bytes_needed(f, w, true);
    p.embeddings_in_file = true;
    p.embedding_bytes = p.dense_bytes - without;
    p.dense_bytes = without;
  }
  const uint64_t base = p.dense_bytes + other_bytes;
  if (total_experts == 0) {
    CLB_CHECK(p.budget == 0 || base + kv_bytes <= p.budget,
              "the memory budget of %s is too small: the dense weights (%s) and the KV cache and "
              "scratch (%s) need %s",
              format_size(p.budget).c_str(), format_size(p.dense_bytes).c_str(),
              format_size(other_bytes + kv_bytes).c_str(), format_size(base + kv_bytes).c_str());
    return p;
  }

  // Per (layer, expert): the chance a decoded token uses it, from history or uniform.
  std::vector<double> use(static_cast<size_t>(cfg.n_layer) * cfg.n_expert, 0.0);
  std::vector<uint64_t>& hist = p.history;
  if (!o.no_history) {
    const std::string dir = o.history_dir.empty() ? default_history_dir() : o.history_dir;
    if (!dir.empty()) {
      p.history_path = history_file(dir, history_key(f));
      hist = load_history(p.history_path, cfg.n_layer, cfg.n_expert);
    }
  }
  for (int l = 0; l < cfg.n_layer; ++l) {
    if (!shape.layer_slab[l]) continue;
    uint64_t sum = 0;
    for (int e = 0; e < cfg.n_expert && !hist.empty(); ++e) sum += hist[l * cfg.n_expert + e];
    for (int e = 0; e < cfg.n_expert; ++e)
      use[l * cfg.n_expert + e] = sum ? static_cast<double>(cfg.n_expert_used) * hist[l * cfg.n_expert + e] / sum
                                      : static_cast<double>(cfg.n_expert_used) / cfg.n_expert;
    p.from_history |= sum > 0;
  }

  // Slots: fixed, or all the budget leaves after the dense part: at an
  // empty context (`slots`) and with the KV cache full (`slots_full`).
  const uint64_t min_slots = static_cast<uint64_t>(std::max(cfg.n_expert_used, 1));
  uint64_t slots, slots_full;
  if (o.slots_per_layer > 0) {
    slots = slots_full =
        std::min<uint64_t>(static_cast<uint64_t>(o.slots_per_layer) * p.n_moe_layers, total_experts);
  } else {
    const uint64_t need = base + kv_bytes + min_slots * p.slab_bytes;
    CLB_CHECK(p.budget >= need,
              "the memory budget of %s is too small: it needs at least %s (dense weights %s, KV "
              "cache and scratch %s, %llu expert slots of %s for one token's experts of a layer)",
              format_size(p.budget).c_str(), format_size(need).c_str(),
              format_size(p.dense_bytes).c_str(), format_size(other_bytes + kv_bytes).c_str(),
              static_cast<unsigned long long>(min_slots), format_size(p.slab_bytes).c_str());
    slots = std::min<uint64_t>((p.budget - base) / p.slab_bytes, total_experts);
    slots_full = std::min<uint64_t>((p.budget - base - kv_bytes) / p.slab_bytes, total_experts);
  }
  // Slots given back to the KV cache leave the 2 MiB page their last kept
  // slot ends in resident (StreamingExpertStore::set_cache_slots): that
  // sliver counts at a full context, as the store counts it.
  if (o.mem_budget > 0 && o.slots_per_layer == 0 && slots_full < slots) {
    auto sliver = [&](uint64_t n) { return huge_page_sliver(n * p.slab_bytes, slots * p.slab_bytes); };
    while (slots_full > min_slots && base + kv_bytes + slots_full * p.slab_bytes + sliver(slots_full) > p.budget)
      --slots_full;
  }
  if (o.mem_budget > 0 && o.slots_per_layer > 0)
    CLB_CHECK(base + kv_bytes + slots * p.slab_bytes <= p.budget,
              "the memory budget of %s is too small for %llu expert slots: it needs %s",
              format_size(p.budget).c_str(), static_cast<unsigned long long>(slots),
              format_size(base + kv_bytes + slots * p.slab_bytes).c_str());
  // Every expert resident even with the KV cache full: nothing to stream.
  p.all_experts_fit = slots_full == total_experts;
  // Guessing the next layer's experts only pays when some must be read: with
  // every expert resident it would cost a router product per layer per token.
  p.prefetch = o.prefetch && !p.all_experts_fit;
  p.warm = o.warm && slots == total_experts && total_experts > 0;

  // Pin the hottest experts by history, at most half the slots beyond one
  // token's worth, so the cache still adapts to the text at hand.
  std::vector<int32_t> order;
  for (int32_t key = 0; key < static_cast<int32_t>(use.size()); ++key)
    if (shape.layer_slab[key / cfg.n_expert]) order.push_back(key);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return use[a] > use[b]; });
  // (Counted at a full context: pinned slabs stay whatever the KV cache takes.)
  if (p.from_history && !p.all_experts_fit && o.slots_per_layer == 0) {
    const uint64_t pin = slots_full > min_slots ? (slots_full - min_slots) / 2 : 0;
    for (uint64_t i = 0; i < pin && i < order.size() && hist[order[i]] > 0; ++i) p.pinned.push_back(order[i]);
  }
  p.n_pinned = static_cast<int>(p.pinned.size());
  p.n_slots = static_cast<int>(slots) - p.n_pinned;
  p.n_slots_full = static_cast<int>(slots_full) - p.n_pinned;
  if (o.slots_per_layer == 0 && p.budget > 0 && slots > slots_full)
    p.slot_room = p.budget - base - static_cast<uint64_t>(p.n_pinned) * p.slab_bytes;

  // Expected reads: an ideal frequency cache holds the `slots` most used slabs.
  double used = 0, missed = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    const int32_t key = order[i];
    used += use[key];
    if (i >= slots) {
      missed += use[key];
      p.disk_bytes_per_token += use[key] * static_cast<double>(shape.layer_slab[key / cfg.n_expert]);
    }
  }
  p.hit_rate = used > 0 ? 1.0 - missed / used : 1.0;
  return p;
}

std::string Plan::describe() const {
  auto sz = [](double b) { return format_size(b); };
  std::string s;
  s += strprintf("memory budget: %s (%s)\n", budget ? sz(budget).c_str() : "unlimited", budget_source.c_str());
  s += strprintf("  dense weights, resident:      %12s  (attention, norms, %srouters, shared experts, dense-layer FFNs)\n",
                 sz(dense_bytes).c_str(), embeddings_in_file ? "" : "embeddings, ");
  if (embeddings_in_file)
    s += strprintf("  token embeddings, in the file: %11s  (not placed: a token's row is read when it comes)\n",
                   sz(embedding_bytes).c_str());
  if (kv_bytes > 0) {
    s += strprintf("  scratch:                      %12s\n", sz(other_bytes).c_str());
    s += strprintf("  KV cache, as the context grows: 0 to %s  (%s: %s per token of context; "
                   "shares its room with the expert cache)\n",
                   sz(kv_bytes).c_str(), dtype_name(kv_type), sz(kv_bytes_per_token).c_str());
  } else {
    s += strprintf("  KV cache and scratch:         %12s", sz(other_bytes).c_str());
    if (kv_bytes_per_token)
      s += strprintf("  (%s KV: %s per token of context)", dtype_name(kv_type), sz(kv_bytes_per_token).c_str());
    s += "\n";
  }
  if (n_moe_layers > 0) {
    s += strprintf("  pinned hot experts:           %12s  (%d x %s%s)\n",
                   sz(static_cast<double>(n_pinned) * slab_bytes).c_str(), n_pinned,
                   sz(slab_bytes).c_str(), from_history ? ", from routing history" : ", no routing history yet");
    s += strprintf("  expert cache:                 %12s  (%d slots x %s, policy %s%s)\n",
                   sz(static_cast<double>(n_slots) * slab_bytes).c_str(), n_slots,
                   sz(slab_bytes).c_str(), policy.c_str(), kv_bytes > 0 ? ", at an empty context" : "");
    if (kv_bytes > 0)
      s += strprintf("  expert cache, context full:   %12s  (%d slots: %d given back to the KV cache)\n",
                     sz(static_cast<double>(n_slots_full) * slab_bytes).c_str(), n_slots_full,
                     n_slots - n_slots_full);
  }
  if (kv_bytes > 0)
    s += strprintf("  total placed:                 %12s at an empty context, %s with the context full\n",
                   sz(used_bytes()).c_str(), sz(used_bytes_full()).c_str());
  else
    s += strprintf("  total placed:                 %12s\n", sz(used_bytes()).c_str());
  s += strprintf("fixed overhead outside the budget: %s (process %s, mapped metadata %s, "
                 "buffered reads in flight %s)\n",
                 sz(fixed_overhead).c_str(), sz(kProcessOverheadBytes).c_str(),
                 sz(metadata_bytes).c_str(), sz(inflight_bytes).c_str());
  if (budget)
    s += strprintf("peak memory (RSS and our page cache) stays under %s\n",
                   sz(budget + fixed_overhead).c_str());
  if (n_moe_layers > 0) {
    s += strprintf("experts: %s in %d MoE layers x %d experts, %d used per token; %s\n",
                   sz(expert_bytes).c_str(), n_moe_layers, n_expert, n_expert_used,
                   all_experts_fit ? "all fit in the cache" : "streamed from disk");
    s += strprintf("expected: hit rate %.1f%%, disk reads %s per token (%s)\n", 100.0 * hit_rate,
                   sz(disk_bytes_per_token).c_str(),
                   from_history ? "from routing history" : "uniform routing");
    const std::string guesses =
        !prefetch ? "off"
        : prefetch_top > 0 && prefetch_top < n_expert_used ? strprintf("on (each token's %d likeliest)", prefetch_top)
                                                            : std::string("on");
    s += strprintf("I/O: %s, %s, next-layer prefetch %s%s\n", io.c_str(),
                   o_direct ? "O_DIRECT" : "buffered + fadvise(DONTNEED)", guesses.c_str(),
                   warm ? "; every expert read in the background at start" : "");
  }
  if (!history_path.empty()) s += strprintf("routing history: %s\n", history_path.c_str());
  if (!notes.empty()) s += "note: " + notes + "\n";
  return s;
}

namespace {

// Owns the dense arena beside the store that serves experts (and answers
// wait_dense from it); forwards the rest.
class PlacedStore : public ExpertStore {
 public:
  PlacedStore(DenseArena arena, std::unique_ptr<ExpertStore> inner)
      : arena_(std::move(arena)), inner_(std::move(inner)) {}
  ExpertWeights acquire(int layer, int expert) override { return inner_->acquire(layer, expert); }
  void release(int layer, int expert) override { inner_->release(layer, expert); }
  void prefetch(int layer, std::span<const int> experts) override { inner_->prefetch(layer, experts); }
  bool wants_prediction() const override { return inner_->wants_prediction(); }
  int prediction_top() const override { return inner_->prediction_top(); }
  void prefetch_predicted(int layer, std::span<const int> experts) override {
    inner_->prefetch_predicted(layer, experts);
  }
  int max_held() const override { return inner_->max_held(); }
  bool ready(int layer, int expert) const override { return inner_->ready(layer, expert); }
  ExpertStoreStats stats() const override { return inner_->stats(); }
  bool expert_counters(std::span<ExpertCounters> out) const override {
    return inner_->expert_counters(out);
  }
  const char* name() const override { return inner_->name(); }
  void set_kv_bytes(uint64_t bytes) override { inner_->set_kv_bytes(bytes); }
  void wait_dense(int stage) override { arena_.wait(stage); }
  void wait_warm() override { inner_->wait_warm(); }
  bool dense_progress(uint64_t* done, uint64_t* total) const override {
    arena_.progress(done, total);
    return true;
  }
  bool read_embedding_row(int64_t row, uint8_t* dst) override {
    if (!arena_.embeddings_on_demand()) return false;
    arena_.read_embedding_row(row, dst);
    return true;
  }

  const DenseArena& arena() const { return arena_; }

 private:
  DenseArena arena_;  // destroyed after inner_
  std::unique_ptr<ExpertStore> inner_;
};

}  // namespace

std::unique_ptr<ExpertStore> make_expert_store(const ExpertStoreOptions& o, const GgufFile& f,
                                               const ModelConfig& cfg, ModelWeights& w,
                                               uint64_t other_bytes, Plan* plan_out, uint64_t kv_bytes,
                                               DType kv_type) {
  CLB_CHECK(!f.parts().empty(), "%s: placement needs a model read from a file", f.name().c_str());
  Plan p = make_plan(o, f, cfg, w, other_bytes, kv_bytes, kv_type);
  // The expert store first: its pool faults in (and its hot set loads) while
  // the dense weights are read.
  std::unique_ptr<ExpertStore> inner;
  // The warm-up starts once the dense weights are in (the arena, made below,
  // is named here when it exists; it outlives the store).
  auto arena_gate = std::make_shared<std::atomic<const DenseArena*>>(nullptr);
  if (p.n_moe_layers == 0) {
    inner = std::make_unique<MappedExpertStore>(w.experts);
  } else {
    StreamingOptions so;
    so.n_slots = p.n_slots;
    so.pinned = p.pinned;
    so.room = p.slot_room;
    so.policy = o.policy;
    so.predict = p.prefetch;
    so.predict_top = o.prefetch_top;
    so.o_direct = o.o_direct;
    so.io = o.io;
    so.io_depth = o.io_depth;
    if (!p.history_path.empty()) {
      so.history_path = p.history_path;
      so.history = p.history;
    }
    if (p.warm)
      so.warm_when = [arena_gate] {
        const DenseArena* a = arena_gate->load(std::memory_order_acquire);
        return a && a->placed();
      };
    auto s = std::make_unique<StreamingExpertStore>(f.parts(), w.experts, cfg.n_expert, so);
    p.notes = s->notes();
    p.io = s->io_name();
    if (o.o_direct && !s->o_direct()) {
      // Fell back to buffered reads: their page cache is overhead again.
      p.o_direct = false;
      const Shape shape = model_shape(w, false);
      p.inflight_bytes = static_cast<uint64_t>(o.io_depth) * shape.max_part_bytes;
      p.fixed_overhead = kProcessOverheadBytes + p.metadata_bytes + p.inflight_bytes;
    }
    inner = std::move(s);
  }
  // The dense reads run on while the caller goes on (its forward pass waits
  // per stage): a first prompt's expert reads share the disk with them.
  DenseArena arena = DenseArena::start(f, w, o.o_direct, p.embeddings_in_file);
  if (plan_out) *plan_out = p;
  auto placed = std::make_unique<PlacedStore>(std::move(arena), std::move(inner));
  arena_gate->store(&placed->arena(), std::memory_order_release);
  return placed;
}

}  // namespace colibri
