#include "moe/cache_policy.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <unordered_map>
#include <utility>

#include "base/error.h"

namespace colibri {

namespace {

class LruPolicy : public CachePolicy {
 public:
  explicit LruPolicy(int n_slots) : last_(n_slots, 0) {}
  void on_insert(int slot, int32_t, uint64_t now) override { last_[slot] = now; }
  void on_access(int slot, int32_t, uint64_t now) override { last_[slot] = now; }
  void on_move(int from, int to) override { last_[to] = last_[from]; }
  double score(int slot, uint64_t) const override { return static_cast<double>(last_[slot]); }
  const char* name() const override { return "lru"; }

 private:
  std::vector<uint64_t> last_;  // (n_slots) tick of the last access
};

// Per key: count of uses, halved once per elapsed epoch of half_life ticks
// (whole epochs, so keys used in the same epoch compare by count, not by
// recency). A slab's score is its key's count, less the use that brought it
// in until it is used again: a newcomer must have been used before to outrank
// a resident, and in a steady cycle the residents stay and the newest
// arrival goes.
class LfuDecayPolicy : public CachePolicy {
 public:
  LfuDecayPolicy(int n_slots, int n_keys, uint64_t half_life, std::span<const uint64_t> prior)
      : key_(n_slots, -1), inserted_(n_slots, 0), uses_(n_slots, 0), count_(n_keys, 0.0),
        epoch_(n_keys, 0), half_life_(half_life) {
    // The history's share of each key, as uses in one half-life.
    uint64_t total = 0;
    for (uint64_t c : prior) total += c;
    if (prior.size() == static_cast<size_t>(n_keys) && total > 0) {
      prior_.resize(n_keys);
      for (int k = 0; k < n_keys; ++k)
        prior_[k] = static_cast<double>(prior[k]) / static_cast<double>(total) * static_cast<double>(half_life);
    }
  }
  void on_insert(int slot, int32_t key, uint64_t now) override {
    key_[slot] = key;
    inserted_[slot] = now;
    uses_[slot] = 0;
  }
  void on_access(int slot, int32_t key, uint64_t now) override {
    const uint64_t e = now / half_life_;
    count_[key] = decay(count_[key], epoch_[key], e) + 1.0;
    epoch_[key] = e;
    ++uses_[slot];
  }
  void on_move(int from, int to) override {
    key_[to] = key_[from];
    inserted_[to] = inserted_[from];
    uses_[to] = uses_[from];
  }
  double score(int slot, uint64_t now) const override {
    const int32_t key = key_[slot];
    const double count = decay(count_[key], epoch_[key], now / half_life_) - (uses_[slot] < 2 ? 1.0 : 0.0) +
                         (prior_.empty() ? 0.0 : prior_[key]);
    // Among equal counts the newest arrival goes first; the bonus is below
    // any difference of counts that matters.
    return count + 1e-9 * (1.0 - static_cast<double>(inserted_[slot]) / static_cast<double>(now + 1));
  }
  const char* name() const override { return "lfu-decay"; }

 private:
  static double decay(double c, uint64_t from, uint64_t to) {
    return to - from >= 64 ? 0.0 : std::ldexp(c, -static_cast<int>(to - from));
  }
  std::vector<int32_t> key_;        // (n_slots)
  std::vector<uint64_t> inserted_;  // (n_slots) tick the slab arrived
  std::vector<uint32_t> uses_;      // (n_slots) uses since it arrived
  std::vector<double> count_;       // (n_keys) uses, as of epoch_
  std::vector<uint64_t> epoch_;     // (n_keys)
  std::vector<double> prior_;       // (n_keys) from the history, or empty
  uint64_t half_life_;
};

}  // namespace

const char* cache_policy_names() { return "lru, lfu-decay"; }

std::unique_ptr<CachePolicy> make_cache_policy(const std::string& name, int n_slots, int n_keys,
                                               uint64_t half_life, std::span<const uint64_t> prior) {
  CLB_CHECK(n_slots >= 1, "a cache needs at least one slot, got %d", n_slots);
  if (name == "lru") return std::make_unique<LruPolicy>(n_slots);
  if (name == "lfu-decay")
    return std::make_unique<LfuDecayPolicy>(
        n_slots, n_keys, half_life > 0 ? half_life : std::max<uint64_t>(64, 8ull * n_slots), prior);
  fail("unknown cache policy '%s' (choices: %s)", name.c_str(), cache_policy_names());
}

uint64_t simulate_cache(CachePolicy& policy, int n_slots, std::span<const int32_t> trace) {
  std::unordered_map<int32_t, int> where;  // key -> slot
  std::vector<int32_t> held(n_slots, -1);  // slot -> key
  int used = 0;
  uint64_t hits = 0, now = 0;
  for (int32_t key : trace) {
    ++now;
    auto it = where.find(key);
    if (it != where.end()) {
      ++hits;
      policy.on_access(it->second, key, now);
      continue;
    }
    int slot = used < n_slots ? used++ : -1;
    if (slot < 0) {
      double best = 0;
      for (int s = 0; s < n_slots; ++s) {
        double sc = policy.score(s, now);
        if (slot < 0 || sc < best) {
          slot = s;
          best = sc;
        }
      }
      where.erase(held[slot]);
    }
    held[slot] = key;
    where[key] = slot;
    policy.on_insert(slot, key, now);
    policy.on_access(slot, key, now);
  }
  return hits;
}

uint64_t simulate_cache(const std::string& policy, int n_slots, int n_keys,
                        std::span<const int32_t> trace, std::span<const uint64_t> prior) {
  auto p = make_cache_policy(policy, n_slots, n_keys, 0, prior);
  return simulate_cache(*p, n_slots, trace);
}

uint64_t simulate_optimal(int n_slots, std::span<const int32_t> trace) {
  const int64_t n = static_cast<int64_t>(trace.size());
  // next[i]: where trace[i] is used again; past the end (distinct per key) if never.
  std::vector<int64_t> next(trace.size());
  std::unordered_map<int32_t, int64_t> seen;
  for (int64_t i = n - 1; i >= 0; --i) {
    auto it = seen.find(trace[i]);
    next[i] = it != seen.end() ? it->second : n + trace[i];
    seen[trace[i]] = i;
  }
  std::set<std::pair<int64_t, int32_t>> by_next;  // (next use, key) of the cached keys
  std::unordered_map<int32_t, int64_t> cached;     // key -> its entry's next use
  uint64_t hits = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int32_t key = trace[i];
    auto it = cached.find(key);
    if (it != cached.end()) {
      ++hits;
      by_next.erase({it->second, key});
    } else if (static_cast<int>(cached.size()) == n_slots) {
      auto last = std::prev(by_next.end());
      if (last->first < next[i]) continue;  // the newcomer is needed last: keep none of it
      cached.erase(last->second);
      by_next.erase(last);
    }
    cached[key] = next[i];
    by_next.insert({next[i], key});
  }
  return hits + std::min<uint64_t>(static_cast<uint64_t>(std::max(n_slots, 0)), seen.size());
}

uint64_t simulate_fixed_set(int n_slots, std::span<const int32_t> trace) {
  std::unordered_map<int32_t, uint64_t> count;
  for (int32_t k : trace) ++count[k];
  std::vector<uint64_t> c;
  c.reserve(count.size());
  for (const auto& [k, v] : count) c.push_back(v);
  const size_t keep = std::min(c.size(), static_cast<size_t>(std::max(n_slots, 0)));
  std::partial_sort(c.begin(), c.begin() + static_cast<std::ptrdiff_t>(keep), c.end(), std::greater<>());
  uint64_t hits = 0;
  for (size_t i = 0; i < keep; ++i) hits += c[i];
  return hits;
}

uint64_t simulate_learned_set(int n_slots, std::span<const int32_t> trace, size_t split) {
  split = std::min(split, trace.size());
  std::unordered_map<int32_t, uint64_t> count;
  for (size_t i = 0; i < split; ++i) ++count[trace[i]];
  std::vector<std::pair<uint64_t, int32_t>> c;  // (uses, key)
  c.reserve(count.size());
  for (const auto& [k, v] : count) c.emplace_back(v, k);
  const size_t keep = std::min(c.size(), static_cast<size_t>(std::max(n_slots, 0)));
  std::partial_sort(c.begin(), c.begin() + static_cast<std::ptrdiff_t>(keep), c.end(),
                    [](const auto& a, const auto& b) { return a.first != b.first ? a.first > b.first : a.second < b.second; });
  std::unordered_map<int32_t, char> held;
  for (size_t i = 0; i < keep; ++i) held[c[i].second] = 1;
  uint64_t hits = 0;
  for (size_t i = split; i < trace.size(); ++i) hits += held.count(trace[i]);
  return hits;
}

}  // namespace colibri
