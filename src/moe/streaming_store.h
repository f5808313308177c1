// The streaming expert store: routed experts read from the model file into a
// fixed pool of slots under a memory budget.
//
// The pool is one anonymous mapping of n_pinned + n_slots slots, each sized
// for the largest slab (its gate, up and down matrices, each part starting on
// a 4 KiB boundary). Pinned slots hold the learned hot set, loaded at start
// and never evicted; the others are a cache under a CachePolicy. A slab is
// read with one positioned read per part (IoEngine: io_uring or pread
// threads), all in flight at once. With O_DIRECT each part's covering 4 KiB
// range is read and the view points at the part inside it (GGUF data is only
// 32-byte aligned); buffered reads are dropped from the page cache once
// copied (fadvise DONTNEED), so the budget also bounds the page cache we add.
//
// The pool is faulted in on a background thread from the start (see
// populate_).
//
// Memory that follows the context: with a `room` (bytes the budget leaves to
// cache slots and the KV cache together), set_kv_bytes() retires the
// highest cache slots as the KV cache grows, before its new pages are
// touched: each retired slab moves into the slot the policy would evict
// next, if it outranks that slab, and the retired memory goes back to the
// system (MADV_DONTNEED). Retired slots are used again when room returns.
//
// Warm-up (StreamingOptions::warm_when): a background thread reads every
// expert, layer by layer in file order, into empty slots, so a cache that can
// hold everything is full after one sequential pass over the file instead of
// after every expert has been routed to once. It only uses a disk the forward
// pass leaves idle: one read of at most kWarmChunk bytes at a time, each
// started only while none of the forward pass's loads (misses, guesses) has
// been in flight for kWarmQuiet, so that a miss waits behind at most one
// chunk, and a forward pass that streams is not held back; and only into slots
// the populate thread has faulted in (at idle priority), never faulting one
// in on the I/O threads, which compete with the forward pass. Its slabs are packed
// for the kernels at their first acquire, not as they land: a short run uses
// few of them.
//
// Thread safety: acquire/release/prefetch come from the forward pass's thread;
// completions arrive on I/O threads; one mutex guards the slot table.
#pragma once

#include <sys/types.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/file_set.h"
#include "base/sys.h"
#include "moe/cache_policy.h"
#include "moe/expert_store.h"
#include "moe/io_engine.h"

namespace colibri {

struct StreamingOptions {
  int n_slots = 1;               // cache slots, besides the pinned ones
  std::vector<int32_t> pinned;   // keys (layer * n_expert + expert) to hold for good
  uint64_t room = 0;             // > 0: bytes for cache slots and the KV cache together (set_kv_bytes)
  std::string policy = kDefaultCachePolicy;
  bool predict = false;          // wants_prediction(): load guessed experts of the next layer
  int predict_top = 0;           // prediction_top(): each token's likeliest guesses only (0: all)
  bool o_direct = false;         // read around the page cache where the file system allows
  size_t io_align = 0;           // O_DIRECT and slot alignment; 0: the page size (tests simulate 64 KiB)
  std::string io = "uring";      // "uring" | "pread"
  int io_depth = 32;
  std::string history_path;      // counts saved here on destruction; empty: not saved
  std::vector<uint64_t> history; // (n_layer, n_expert) counts to add to, or empty
  // Set: once it returns true (polled; it must not block), every expert not
  // yet resident is read into the empty slots in the background, in file
  // order (the warm-up of a cache that holds them all). Loads the forward
  // pass waits on still go first.
  std::function<bool()> warm_when;
  size_t warm_chunk = 0;         // the warm-up's reads; 0: kWarmChunk (tests use a page)
  // Set (tests): the populate thread faults nothing in until it returns true (polled).
  std::function<bool()> populate_when;
};

class StreamingExpertStore : public ExpertStore {
 public:
  // `layers` as in ModelWeights::experts, offsets as GgufFile's: into the
  // model's files (`files`, GgufFile::parts(): one, or a split model's
  // shards). Throws Error.
  StreamingExpertStore(const std::vector<MappedFile::Part>& files,
                       std::vector<ExpertTensors> layers, int n_expert, const StreamingOptions& o);
  // One file at `path`, whose size must be file_size.
  StreamingExpertStore(const std::string& path, uint64_t file_size,
                       std::vector<ExpertTensors> layers, int n_expert, const StreamingOptions& o);
  ~StreamingExpertStore() override;

  ExpertWeights acquire(int layer, int expert) override;
  void release(int layer, int expert) override;
  void prefetch(int layer, std::span<const int> experts) override;
  bool wants_prediction() const override { return predict_; }
  int prediction_top() const override { return predict_top_; }
  void prefetch_predicted(int layer, std::span<const int> experts) override;
  // Every cache slot may be in use at once (pinned experts need none).
  int max_held() const override;
  void set_kv_bytes(uint64_t bytes) override;
  void wait_warm() override;
  // Uses cache slots [0, n) of the n_slots() (at least one); retires the
  // rest as set_kv_bytes does. Called with nothing acquired.
  void set_cache_slots(int n);
  bool ready(int layer, int expert) const override;
  ExpertStoreStats stats() const override;
  bool expert_counters(std::span<ExpertCounters> out) const override;
  const char* name() const override { return "stream"; }

  // Bytes one slot needs for the largest slab of `layers`.
  // align: as StreamingOptions::io_align.
  static size_t slot_bytes(const std::vector<ExpertTensors>& layers, bool o_direct, size_t align = 0);

  int n_slots() const { return n_cache_; }  // at most; set_cache_slots may use fewer
  int n_pinned() const { return n_pinned_; }
  size_t slot_size() const { return slot_bytes_; }
  bool o_direct() const { return files_->direct(); }
  const char* io_name() const { return io_->name(); }
  const char* policy_name() const { return policy_->name(); }
  // What fell back and why ("O_DIRECT unsupported here: ..."), or empty.
  const std::string& notes() const { return notes_; }
  // History plus this run's acquires, per (layer, expert).
  std::vector<uint64_t> counts() const;

 private:
  enum class State : uint8_t { kEmpty, kLoading, kReady, kFailed };
  struct Slot {
    int32_t key = -1;
    State state = State::kEmpty;
    bool pinned = false;
    bool failed = false;   // a part failed; set while loading
    bool guessed = false;  // loaded for a prediction, not acquired since
    bool warming = false;  // loading for the warm-up
    bool unpacked = false;  // read by the warm-up, packed at its first acquire
    int users = 0;         // acquire() without release()
    int pending = 0;       // parts in flight
    uint64_t visit = 0;    // layer visit of the last touch
    ExpertWeights w;       // views into the slot once ready
    char error[256] = {};
  };
  static constexpr int kParts = 3;  // gate, up, down
  // The warm-up's reads: a miss that arrives waits behind at most this much
  // (0.4 ms at 1.3 GB/s); rounded up to the O_DIRECT alignment.
  static constexpr size_t kWarmChunk = size_t{512} << 10;

  static void on_read(void* ctx, ReadOp& op, const char* error);
  void enter_layer(int layer);
  // The slot to fill among the active ones; -1 if none may be evicted now.
  int pick_victim(bool for_prefetch) const;
  // Moves the ready slab in slot `from` into slot `to`, evicting to's.
  void move_slab(int from, int to);
  // by_prefetch: counted as a prefetch load; urgent: the forward pass needs
  // the slab for the layer it is at (its reads go before any guess's).
  void start_load(int slot, int32_t key, bool by_prefetch, bool urgent, bool warming = false);
  // Packs a slab the warm-up read, on the calling thread; mu_ held on entry
  // and exit, released while packing.
  void pack_late(std::unique_lock<std::mutex>& lock, Slot& s);
  // A part's bytes, as read, into the kernels' layout (where its view packs).
  static void pack_part(const TensorView& v);
  // Starts the warm-up's next chunk if none is in flight and the forward
  // pass has no load in flight; wakes the warm-up thread when its slab is
  // done. mu_ held on entry and exit, released while submitting.
  void kick_warm(std::unique_lock<std::mutex>& lock);
  // Starts loads of the experts not resident; every named slab is marked as
  // touched in layer visit `visit` (protected from prefetch evictions then).
  void prefetch_locked(int layer, std::span<const int> experts, uint64_t visit, bool urgent);
  // The warm-up thread's body (see StreamingOptions::warm_when).
  void warm(std::stop_token stop, const std::function<bool()>& when);

  std::string notes_;
  std::unique_ptr<FileSet> files_;
  std::string path_;                   // the first file, for messages
  std::vector<ExpertTensors> layers_;  // (n_layer)
  int n_layer_, n_expert_;
  bool predict_;
  int predict_top_;
  std::string history_path_;

  int n_pinned_ = 0, n_cache_ = 0;
  int active_ = 0;        // cache slots in use: slots [0, n_pinned_ + active_) (under mu_)
  uint64_t room_ = 0;     // StreamingOptions::room
  size_t slot_bytes_ = 0;
  size_t align_ = 0;  // O_DIRECT offsets, lengths and slot starts: the page size, or io_align
  uint8_t* pool_ = nullptr;  // (n_pinned + n_cache, slot_bytes) anonymous mapping
  size_t pool_bytes_ = 0;
  // Faults the pool in, in slot order (the order empty slots are filled),
  // from the first load on, at idle priority (SCHED_IDLE): kPopulateLead
  // past the highest slot a load has used, and while the forward pass waits
  // on a load, as far as the whole pool. First touch of fresh memory costs
  // about as much CPU as a fast disk read of it (a VM backs each page on its
  // first write), better spent while the cores wait than inside the I/O
  // threads' O_DIRECT reads, where it slowed the reads and took the cores
  // the forward pass computes on: Qwen3-30B-A3B Q4_0 at an 8 GiB limit
  // decoded 6.4-8.8 tok/s with 256 MiB populated ahead at nice 10, 10.3-12.0
  // with the whole pool at SCHED_IDLE. The whole pool at any time made a
  // larger budget slower (12 GiB: 7.0-9.1 tok/s against 8 GiB's 10.5-16.3):
  // idle priority does not preempt a 2 MiB page's fault already under way,
  // and a run that uses 8 GB of a 10 GB pool paid for all of it during
  // decode; gated on the waits, 10.3-12.7. Where SCHED_IDLE is refused, at
  // nice 10 and no further than kPopulateLead past the highest slot a load
  // has used (at nice 10 a first prompt at 8 GiB reached its first token in
  // 2.7-2.8 s with 256 MiB ahead, 3.2-4.6 s with 1 GiB).
  static constexpr size_t kPopulateLead = size_t{256} << 20;
  int io_waiters_ = 0;  // forward-pass threads waiting on a load (under populate_mu_)
  void io_waiting(int delta);  // acquire() enters (+1) or leaves (-1) such a wait
  // What stays resident when cache slots from n up are retired
  // (huge_page_sliver past the first n).
  size_t retired_sliver(int n) const;
  std::mutex populate_mu_;
  std::condition_variable_any populate_cv_;
  // 1 + the highest slot index loaded, or awaited by the warm-up, so far (under populate_mu_).
  size_t frontier_ = 0;
  size_t populate_end_ = 0;  // bytes of the pool in active slots (under populate_mu_)
  size_t populate_next_ = 0;  // the populate thread's next region (under populate_mu_)
  std::jthread populate_;
  // First touch of the pool, one thread at a time per 2 MiB region. Threads
  // that fault the same untouched huge page at once each allocate one and
  // are each charged 2 MiB until all but one give theirs back: with 16 I/O
  // threads reading into fresh slots (3 parts of 2-3 slots share a page),
  // a cgroup's usage ran 7-20 MiB over the budget at the first prompt. Each
  // region is kUntouched, then kPopulating (the populate thread) or
  // kFaulting (a reader, or a slab moving in), then kResident; back to
  // kUntouched when retired. A reader that finds the populate thread on its
  // region waits for it up to kPopulateWait, then faults the region itself
  // (the idle-priority thread may not run again for a while).
  enum RegionState : uint8_t { kUntouched, kPopulating, kFaulting, kResident };
  static constexpr double kPopulateWait = 0.005;
  std::unique_ptr<std::atomic<uint8_t>[]> region_;
  size_t n_region_ = 0;
  size_t region_end(size_t r) const { return std::min(pool_bytes_, (r + 1) * kHugePageBytes); }
  // Makes bytes [begin, end) of the pool resident, under the protocol above;
  // returns the bytes this call faulted in itself.
  size_t fault_in(size_t begin, size_t end);
  std::atomic<uint64_t> read_faulted_{0};  // fault_in's bytes on the I/O threads (before_read)
  // Whether every region under `slot` is resident.
  bool slot_resident(int slot) const;
  // Moves the frontier up to `slot` (the populate thread then faults it in).
  void want_populated(int slot);
  // How often the warm-up looks again for its next slot faulted in, or for
  // a quiet disk.
  static constexpr std::chrono::milliseconds kWarmPoll{2};
  // The warm-up reads only after the forward pass has had no load in flight
  // for this long: while the forward pass streams (the first tokens of a
  // run whose budget holds every expert), each warm-up chunk holds one of
  // its misses back, for experts the run may never use. OLMoE-1B-7B Q4_0
  // at a 4G limit, disk capped at 1.3 GB/s, 128 tokens, back to back:
  // 27-36 tok/s with no quiet time, 23-44 with 5 ms, 38-44 with 50 ms,
  // beside 37-42 at 3G, where no warm-up runs; a server's first request is
  // as fast either way (bench/RESULTS.md).
  static constexpr double kWarmQuiet = 0.05;
  double forward_load_at_ = 0;  // under mu_: when a forward-pass load last started or finished
  // No load but `own` (the warm-up's, or none) in flight, and none of the
  // forward pass's for kWarmQuiet. mu_ held.
  bool disk_quiet(int own) const;
  static void before_read(void* ctx, ReadOp& op);
  std::vector<Slot> slots_;       // pinned first
  std::vector<ReadOp> ops_;       // (n_slots, kParts), reused by every load of a slot
  std::vector<int32_t> where_;    // (n_layer, n_expert) -> slot or -1
  std::vector<uint64_t> counts_;  // (n_layer, n_expert) history + acquires
  std::vector<ExpertCounters> per_expert_;  // (n_layer, n_expert) this run's hits, misses, bytes
  std::vector<uint64_t> pred_mark_;  // (n_layer, n_expert): the prediction that named it
  std::vector<uint64_t> layer_pred_; // (n_layer): the open prediction for the layer, 0: none
  uint64_t pred_gen_ = 0;
  std::unique_ptr<CachePolicy> policy_;  // over cache slots, indexed by slot - n_pinned
  std::unique_ptr<IoEngine> io_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  int loading_ = 0;       // slots in State::kLoading
  // The warm-up's slab in progress (under mu_): its slot (-1: none), its
  // parts' whole reads, and where the next chunk starts.
  std::condition_variable warm_cv_;  // the warm-up thread's waits
  int warm_slot_ = -1;
  ReadOp warm_whole_[kParts];
  int warm_part_ = 0;
  size_t warm_at_ = 0;
  size_t warm_chunk_ = 0;     // kWarmChunk rounded up to the O_DIRECT alignment
  bool warm_busy_ = false;    // a chunk is in flight
  bool warm_failed_ = false;  // a chunk failed
  char warm_error_[256] = {};
  int active_layer_ = -1;
  uint64_t visit_ = 0;    // counts entries into a layer (acquire of a new layer, or prefetch)
  uint64_t now_ = 0;      // acquire ticks, the policy's clock
  ExpertStoreStats stats_;
  bool warm_stop_ = false;  // under mu_: the warm-up ends
  bool warm_over_ = true;   // under mu_: no warm-up is running (none, finished or stopped)
  std::jthread warm_;       // started last, stopped first
};

}  // namespace colibri
