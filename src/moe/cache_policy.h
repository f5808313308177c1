// Which cached expert slab to evict.
//
// A policy keeps one score per slot; the store evicts the lowest-scoring slot
// among those it may evict (not pinned, not in use, not loading). Time is the
// store's access counter, one tick per acquire().
//
//  - "lru": score = tick of the last access.
//  - "lfu-decay": score = an access count that halves every `half_life`
//    ticks. Decoding visits every layer once per token, so with a cache
//    smaller than the working set LRU evicts exactly the slab the next token
//    reuses; a decayed frequency keeps the experts the router favours and
//    still forgets them when the text moves on (docs/STREAMING.md has the
//    measurements that made it the default).
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
  // The slot now holds a newly loaded slab.
  virtual void on_insert(int slot, uint64_t now) = 0;
  virtual void on_access(int slot, uint64_t now) = 0;
  // Lower is evicted first.
  virtual double score(int slot, uint64_t now) const = 0;
  virtual const char* name() const = 0;
};

// "lru" or "lfu-decay"; throws Error naming the choices otherwise.
// half_life: ticks, for lfu-decay (0: 4 ticks per slot).
std::unique_ptr<CachePolicy> make_cache_policy(const std::string& name, int n_slots,
                                               double half_life = 0);
const char* cache_policy_names();  // "lru, lfu-decay"
inline constexpr const char* kDefaultCachePolicy = "lfu-decay";

// Replays a trace of expert keys (any ints) through a cache of n_slots slabs
// under `policy` with nothing pinned or in use, as the store would: a key not
// cached evicts the lowest score (ties to the lowest slot). Returns the hits.
uint64_t simulate_cache(CachePolicy& policy, int n_slots, std::span<const int32_t> trace);

}  // namespace colibri
