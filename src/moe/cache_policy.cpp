#include "moe/cache_policy.h"

#include <cmath>
#include <unordered_map>

#include "base/error.h"

namespace colibri {

namespace {

class LruPolicy : public CachePolicy {
 public:
  explicit LruPolicy(int n_slots) : last_(n_slots, 0) {}
  void on_insert(int slot, uint64_t now) override { last_[slot] = now; }
  void on_access(int slot, uint64_t now) override { last_[slot] = now; }
  double score(int slot, uint64_t) const override { return static_cast<double>(last_[slot]); }
  const char* name() const override { return "lru"; }

 private:
  std::vector<uint64_t> last_;  // (n_slots) tick of the last access
};

// count(now) = count(t) * 2^-((now - t) / half_life); each access adds 1.
class LfuDecayPolicy : public CachePolicy {
 public:
  LfuDecayPolicy(int n_slots, double half_life)
      : count_(n_slots, 0.0), at_(n_slots, 0), inv_half_life_(1.0 / half_life) {}
  void on_insert(int slot, uint64_t now) override {
    count_[slot] = 1.0;
    at_[slot] = now;
  }
  void on_access(int slot, uint64_t now) override {
    count_[slot] = decayed(slot, now) + 1.0;
    at_[slot] = now;
  }
  double score(int slot, uint64_t now) const override { return decayed(slot, now); }
  const char* name() const override { return "lfu-decay"; }

 private:
  double decayed(int slot, uint64_t now) const {
    return count_[slot] * std::exp2(-static_cast<double>(now - at_[slot]) * inv_half_life_);
  }
  std::vector<double> count_;  // (n_slots) decayed access count as of at_
  std::vector<uint64_t> at_;   // (n_slots)
  double inv_half_life_;
};

}  // namespace

const char* cache_policy_names() { return "lru, lfu-decay"; }

std::unique_ptr<CachePolicy> make_cache_policy(const std::string& name, int n_slots,
                                               double half_life) {
  CLB_CHECK(n_slots >= 1, "a cache needs at least one slot, got %d", n_slots);
  if (name == "lru") return std::make_unique<LruPolicy>(n_slots);
  if (name == "lfu-decay")
    return std::make_unique<LfuDecayPolicy>(n_slots, half_life > 0 ? half_life : 4.0 * n_slots);
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
      policy.on_access(it->second, now);
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
    policy.on_insert(slot, now);
  }
  return hits;
}

}  // namespace colibri
