// Placement: where each part of a model lives under a memory budget, and the
// factory that builds the expert store that keeps it there.
//
// The budget holds, in this order: the dense weights (attention, norms,
// embeddings, routers, shared experts), copied into anonymous memory; the
// scratch the caller states; the pinned hot experts (from the routing
// history); and cache slots for the rest, which share their room with the KV
// cache: at an empty context the slots take it all, and as the context grows
// the expert cache gives slots back before the KV cache touches new pages. Outside it is a fixed
// overhead the plan states: the process itself, the mapped metadata at the
// start of the file (tokenizer strings), and the page cache of buffered reads
// in flight. Peak memory, page cache charged to us included, stays under
// budget + overhead.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "moe/cache_policy.h"
#include "moe/expert_store.h"

namespace colibri {

class GgufFile;
struct ModelConfig;
struct ModelWeights;

struct ExpertStoreOptions {
  uint64_t mem_budget = 0;  // bytes; 0: the cgroup limit or MemAvailable, less the overhead
  std::string policy = kDefaultCachePolicy;  // "lru" | "lfu-decay"
  bool prefetch = true;     // load the next layer's predicted experts early
  // Of each token's guesses, its likeliest this many (0: all n_expert_used).
  // A wrong guess costs a whole slab's read: on the disk-bound runs of
  // docs/STREAMING.md all eight of OLMoE's guesses cost 25-30% of decode
  // speed, the two likeliest (86-95% of them used) about nothing.
  int prefetch_top = 2;
  // Defaults measured here (docs/STREAMING.md): O_DIRECT with pread threads
  // was fastest; O_DIRECT falls back to buffered reads where unsupported.
  bool o_direct = true;     // read experts and dense weights with O_DIRECT (else buffered + fadvise DONTNEED)
  std::string io = "pread"; // "uring" | "pread"
  int io_depth = 32;        // reads in flight (pread: threads, at most 16)
  std::string history_dir;  // "": $XDG_CACHE_HOME/colibri or ~/.cache/colibri
  bool no_history = false;
  int slots_per_layer = 0;  // > 0: exactly this many cache slots per MoE layer (tests)
  // When the budget holds every expert: read them all in the background once
  // the dense weights are in, in file order, instead of one read per expert
  // as tokens first route to it.
  bool warm = true;
};

// Process memory besides what the plan places (code, libraries, thread
// stacks, allocator slack); part of the fixed overhead.
inline constexpr uint64_t kProcessOverheadBytes = 48ull << 20;

struct Plan {
  uint64_t budget = 0;
  std::string budget_source;   // "--mem", "cgroup v1 limit 8.00 GiB", ...
  uint64_t dense_bytes = 0;    // resident dense weights
  bool embeddings_in_file = false;  // token embeddings read a row per token (not in dense_bytes)
  uint64_t embedding_bytes = 0;     // what that leaves out
  uint64_t other_bytes = 0;    // scratch (and any KV cache counted as fixed), as the caller stated
  uint64_t kv_bytes = 0;       // the KV cache at a full context, which shares its room with cache slots
  uint64_t kv_bytes_per_token = 0;  // KV cache bytes one token of context takes (all layers)
  DType kv_type = DType::F16;       // the KV cache's storage
  uint64_t slab_bytes = 0;     // one slot
  int n_moe_layers = 0, n_expert = 0, n_expert_used = 0;
  uint64_t expert_bytes = 0;   // all routed experts in the file
  int n_pinned = 0;
  int n_slots = 0;             // cache slots besides the pinned ones, at an empty context
  int n_slots_full = 0;        // the same with the KV cache full (n_slots when kv_bytes is 0)
  uint64_t slot_room = 0;      // bytes the cache slots and the KV cache share (StreamingOptions::room); 0: fixed
  bool all_experts_fit = false;
  bool warm = false;           // every expert read in the background at start (all fit at an empty context)
  bool from_history = false;   // pinned set and expectations from routing counts
  std::string history_path;    // "" without history
  std::vector<uint64_t> history;  // (n_layer, n_expert) counts read from it, or empty
  uint64_t metadata_bytes = 0; // the mapped start of the file
  uint64_t inflight_bytes = 0; // page cache of buffered reads in flight
  uint64_t fixed_overhead = 0; // process + metadata + inflight: outside the budget
  double disk_bytes_per_token = 0;  // expected, decoding one token
  double hit_rate = 0;              // expected
  std::string policy, io;
  bool o_direct = false, prefetch = false;
  int prefetch_top = 0;        // ExpertStoreOptions::prefetch_top
  std::string notes;           // fallbacks the store took
  std::vector<int32_t> pinned; // keys (layer * n_expert + expert)

  // What the plan places at an empty context, and with the KV cache full.
  uint64_t used_bytes() const {
    return dense_bytes + other_bytes + static_cast<uint64_t>(n_pinned + n_slots) * slab_bytes;
  }
  uint64_t used_bytes_full() const {
    return dense_bytes + other_bytes + kv_bytes + static_cast<uint64_t>(n_pinned + n_slots_full) * slab_bytes;
  }
  std::string describe() const;
};

// "4G", "512M", "2.5GiB", "100k", "123" (bytes); units are powers of 1024.
// Throws Error on anything else.
uint64_t parse_size(const std::string& s);
std::string format_size(double bytes);

// The memory this process may use: the smallest of the cgroup v1
// memory.limit_in_bytes, the cgroup v2 memory.max and MemAvailable. *source
// says which.
uint64_t detect_memory_limit(std::string* source);

// Bytes of KV cache one token of context takes in every layer, stored as
// kv_type (F16, F32 or Q8_0: model/kv_cache.h).
uint64_t kv_cache_bytes_per_token(const ModelConfig& c, DType kv_type);

// Bytes of a KV cache of n_seq sequences of n_ctx positions.
uint64_t kv_cache_bytes(const ModelConfig& c, int n_ctx, int n_seq, DType kv_type);

// The forward pass's scratch for batches of n_batch on n_threads threads
// over a context of n_ctx.
uint64_t scratch_bytes_estimate(const ModelConfig& cfg, int n_ctx, int n_batch, int n_threads);

// Bytes of the KV cache (n_seq sequences of n_ctx positions, stored as
// kv_type) plus the scratch: what a caller passes as other_bytes when it has
// not measured its own and holds the KV cache fixed.
uint64_t runtime_bytes_estimate(const ModelConfig& cfg, int n_ctx, int n_batch, int n_seq,
                                int n_threads, DType kv_type);

// The placement, without touching the weights. other_bytes are held for
// good; kv_bytes (the KV cache at a full context) share their room with the
// expert cache, which gives slots back as the KV cache's pages are touched
// (ExpertStore::set_kv_bytes); kv_type is the cache's storage (what the
// plan reports per token). Throws Error when the budget is too small, saying
// how much is needed.
Plan make_plan(const ExpertStoreOptions& o, const GgufFile& f, const ModelConfig& cfg,
               const ModelWeights& w, uint64_t other_bytes, uint64_t kv_bytes = 0,
               DType kv_type = DType::F16);

// Plans, builds the store for the experts, then starts copying the dense
// weights into anonymous memory (moe/dense_arena.h), pointing w's views at
// the copy as each lands: read a view only after the store's wait_dense()
// covers it. The returned store owns that memory: it must outlive every use
// of w. Throws Error.
std::unique_ptr<ExpertStore> make_expert_store(const ExpertStoreOptions& o, const GgufFile& f,
                                               const ModelConfig& cfg, ModelWeights& w,
                                               uint64_t other_bytes, Plan* plan_out = nullptr,
                                               uint64_t kv_bytes = 0, DType kv_type = DType::F16);

}  // namespace colibri
