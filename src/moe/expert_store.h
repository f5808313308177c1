// The expert store: the only way the forward pass reaches routed-expert
// weights.
//
// The unit of residency is one (layer, expert) slab: its gate, up and down
// matrices. A store decides where slabs live (the mapped file, a RAM cache
// filled from disk under a budget) and the transformer only asks for views.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "tensor/view.h"

namespace colibri {

// One routed expert's weights as 2-D views:
// gate, up: (n_ff_exp rows of n_embd), down: (n_embd rows of n_ff_exp).
struct ExpertWeights {
  TensorView gate;
  TensorView up;
  TensorView down;
};

// Where a layer's expert stacks sit in the model file (3-D tensors with
// ne = {n_in, n_out, n_expert}); the store slices slabs out of them.
struct ExpertTensors {
  TensorView gate_exps;  // (n_expert, n_ff_exp, n_embd)
  TensorView up_exps;    // (n_expert, n_ff_exp, n_embd)
  TensorView down_exps;  // (n_expert, n_embd, n_ff_exp)
  uint64_t gate_offset = 0;  // file offsets of the stacks, for streaming stores
  uint64_t up_offset = 0;
  uint64_t down_offset = 0;

  size_t slab_bytes() const {
    return gate_exps.slab_bytes() + up_exps.slab_bytes() + down_exps.slab_bytes();
  }
};

struct ExpertStoreStats {
  uint64_t requests = 0;   // acquire() calls
  uint64_t hits = 0;       // served without waiting on a load
  uint64_t bytes_read = 0; // bytes read from disk by the store itself
  double io_wait_s = 0;    // time acquire() spent waiting on loads
  // Streaming stores only.
  uint64_t loads = 0;           // slabs read from disk
  uint64_t prefetch_loads = 0;  // of those, started by a prefetch
  uint64_t warm_loads = 0;      // of those, read by the warm-up of a cache that holds every expert
  double warm_done_s = 0;       // seconds from the store's start to the warm-up's end (0: none, or not yet)
  uint64_t evictions = 0;
  double read_busy_s = 0;       // wall time with reads in flight: disk GB/s = bytes_read / this
  // Bytes of fresh memory the reads faulted in themselves (not populated ahead).
  uint64_t read_faulted = 0;
  // Next-layer prediction (prefetch_predicted): recall = pred_hits / pred_acquires.
  uint64_t pred_experts = 0;    // experts named by predictions
  uint64_t pred_acquires = 0;   // acquires in layer visits that had a prediction
  uint64_t pred_hits = 0;       // of those, experts the prediction named
  uint64_t pred_loads = 0;      // slabs read because a prediction named them
  uint64_t pred_loads_used = 0; // of those, acquired before they were evicted
  // Memory that follows the context (set_kv_bytes): cache slots in use now
  // and at the start, and slots given back as the KV cache grew.
  int cache_slots = 0;
  int cache_slots_start = 0;
  uint64_t slots_given_back = 0;
};

// Where one (layer, expert) slab is, and what reaching it has cost: for
// monitoring (the server's expert map), not for placement decisions.
enum class Residency : uint8_t { kMapped, kOnDisk, kLoading, kCached, kPinned };
struct ExpertCounters {
  uint64_t hits = 0;        // acquires served without waiting on a load
  uint64_t misses = 0;      // acquires that waited on a load
  uint64_t bytes_read = 0;  // bytes read from disk for this slab
  Residency where = Residency::kMapped;
};

class ExpertStore {
 public:
  virtual ~ExpertStore() = default;
  // Views valid until release(layer, expert). May block while loading.
  virtual ExpertWeights acquire(int layer, int expert) = 0;
  virtual void release(int layer, int expert) {}
  // A hint that these experts of `layer` will be asked for soon.
  virtual void prefetch(int layer, std::span<const int> experts) {}
  // Whether the store wants the next MoE layer's experts guessed ahead of
  // routing (moe/predict.h); then the transformer passes each guess to
  // prefetch_predicted(), and the store scores it against what it acquires.
  virtual bool wants_prediction() const { return false; }
  // How many of each token's guessed experts it wants (its likeliest
  // first); 0: all n_expert_used.
  virtual int prediction_top() const { return 0; }
  virtual void prefetch_predicted(int layer, std::span<const int> experts) {
    prefetch(layer, experts);
  }
  // How many experts may be held (acquired, not yet released) at once
  // without waiting on one's own release: the forward pass runs up to this
  // many of a layer's experts as one parallel job.
  virtual int max_held() const { return 1; }
  // Whether acquire(layer, expert) would return without waiting on a load.
  virtual bool ready(int layer, int expert) const { return true; }
  virtual ExpertStoreStats stats() const = 0;
  // Fills out[layer * n_expert + expert] (out holds n_layer * n_expert) and
  // returns true; false where the store keeps no per-expert figures (the
  // mapped store: every expert is in the mapping, the page cache decides).
  virtual bool expert_counters(std::span<ExpertCounters> out) const { return false; }
  virtual const char* name() const = 0;
  // The dense weights a placed store copies out of the file load in the
  // background, in stages (moe/dense_arena.h: 0 the token embeddings, 1 + l
  // layer l, n_layer + 1 the output): returns once every stage <= `stage` is
  // in place (kAllDense: all), and only then may the views of those weights
  // be read. Throws Error if their load failed.
  static constexpr int kAllDense = 1 << 30;
  virtual void wait_dense(int stage) {}
  // Returns once the background read of every expert (the warm-up of a
  // cache that holds them all) has finished, at once where there is none:
  // benchmarks time a warm store.
  virtual void wait_warm() {}
  // Bytes of dense weights read so far and in all (a progress display polls
  // it); false where the store loads none itself.
  virtual bool dense_progress(uint64_t* done, uint64_t* total) const { return false; }
  // Token embeddings a placed store left in the file (a tight budget): copies
  // row `row` (the file's layout) to dst and returns true; false where they
  // are resident and the caller reads its view. Throws Error on a failed read.
  virtual bool read_embedding_row(int64_t row, uint8_t* dst) { return false; }
  // The KV cache now holds (at most) `bytes` of touched memory, and is about
  // to write the rows that made it grow: a store under a budget shrinks its
  // cache first, giving the room back before the KV pages are touched (and
  // grows it again when the context shrinks). Called between forward steps,
  // with nothing acquired.
  virtual void set_kv_bytes(uint64_t bytes) {}
};

// Serves views straight into the memory-mapped model file: the page cache
// decides residency. The baseline every other store must match bit for bit.
class MappedExpertStore : public ExpertStore {
 public:
  explicit MappedExpertStore(std::vector<ExpertTensors> layers);
  ExpertWeights acquire(int layer, int expert) override;
  int max_held() const override { return 1 << 20; }
  ExpertStoreStats stats() const override { return stats_; }
  const char* name() const override { return "mmap"; }

 private:
  std::vector<ExpertTensors> layers_;  // (n_layer); empty stacks in dense layers
  ExpertStoreStats stats_;
};

}  // namespace colibri
