// Which cached expert slab to evict.
//
// A policy keeps one score per slot; the store evicts the lowest-scoring slot
// among those it may evict (not pinned, not in use, not loading). Time is the
// store's access counter, one tick per acquire().
//
//  - "lru": score = tick of the last access.
//  - "lfu-decay": score = how often the slab's expert was used, counted for
//    every (layer, expert) whether cached or not and halved every `half_life`
//    ticks, not counting the use that brought it in; ties evict the newest
//    arrival. Decoding
//    visits every layer once per token, so with a cache smaller than one
//    token's experts LRU evicts exactly the slab the next token reuses; a
//    frequency keeps the experts the router favours (and a new arrival must
//    earn its place), while the halving forgets them when the text moves on.
//    With a routing history (a prior: uses per key from earlier runs), each
//    key's score also counts the uses the history predicts for one half-life,
//    which never decay: the cache starts from what the workload used before
//    and recent use still moves it.
//    docs/STREAMING.md has the measurements that made it the default.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace colibri {

class CachePolicy {
 public:
  virtual ~CachePolicy() = default;
  // The slot now holds a newly loaded slab of `key` (a demand miss or a
  // prefetch; not a use).
  virtual void on_insert(int slot, int32_t key, uint64_t now) = 0;
  // One use of the slab in the slot (an acquire).
  virtual void on_access(int slot, int32_t key, uint64_t now) = 0;
  // The slab in slot `from` moved to slot `to` (whose own slab was evicted),
  // keeping its history; `from` is empty after.
  virtual void on_move(int from, int to) = 0;
  // Lower is evicted first.
  virtual double score(int slot, uint64_t now) const = 0;
  virtual const char* name() const = 0;
};

// "lru" or "lfu-decay" over keys in [0, n_keys); throws Error naming the
// choices otherwise. half_life: ticks, for lfu-decay (0: 8 per slot, at
// least 64). prior: (n_keys) uses from a routing history, or empty; lru
// ignores it.
std::unique_ptr<CachePolicy> make_cache_policy(const std::string& name, int n_slots, int n_keys,
                                               uint64_t half_life = 0, std::span<const uint64_t> prior = {});
const char* cache_policy_names();  // "lru, lfu-decay"
inline constexpr const char* kDefaultCachePolicy = "lfu-decay";

// Replays a trace of keys in [0, n_keys) through a cache of n_slots slabs
// under `policy` with nothing pinned or in use, as the store would: a key not
// cached evicts the lowest score (ties to the lowest slot). Returns the hits.
uint64_t simulate_cache(CachePolicy& policy, int n_slots, std::span<const int32_t> trace);
uint64_t simulate_cache(const std::string& policy, int n_slots, int n_keys,
                        std::span<const int32_t> trace, std::span<const uint64_t> prior = {});

// Bounds for the policies on a recorded trace, with knowledge no policy has:
//  - optimal: the most hits any cache of n_slots slabs can get, even one
//    filled before the trace starts: Belady's MIN (on a miss, evict the slab
//    used again farthest ahead, or keep none of the newcomer if that is used
//    again latest) from an empty cache, plus the first uses of the first
//    n_slots distinct keys, which a cache filled with them beforehand serves
//    (no filling saves more misses than it has slots);
//  - fixed set: the hits of the n_slots keys used most over the whole trace,
//    held for good from the start (what pinning a perfectly learned hot set
//    gives); never above optimal.
uint64_t simulate_optimal(int n_slots, std::span<const int32_t> trace);
uint64_t simulate_fixed_set(int n_slots, std::span<const int32_t> trace);

// What can be learned: the hits on trace[split, end) of the n_slots keys used
// most in trace[0, split) (ties to the lower key; unseen keys never chosen),
// held for good. Against the later part's own best fixed set it shows how much
// of that bound is hindsight: with routing close to uniform, the keys that
// happen to be used most in a stretch are mostly noise no policy can foresee.
uint64_t simulate_learned_set(int n_slots, std::span<const int32_t> trace, size_t split);

}  // namespace colibri
