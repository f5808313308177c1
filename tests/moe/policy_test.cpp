// Cache policies on synthetic traces, against an independent LRU oracle and
// the behaviour each policy is chosen for.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <list>
#include <random>
#include <unordered_map>

#include "base/error.h"
#include "moe/cache_policy.h"

namespace colibri {
namespace {

// Textbook LRU: a recency list and a map into it.
uint64_t lru_oracle(int n_slots, const std::vector<int32_t>& trace) {
  std::list<int32_t> order;  // front: most recent
  std::unordered_map<int32_t, std::list<int32_t>::iterator> at;
  uint64_t hits = 0;
  for (int32_t k : trace) {
    auto it = at.find(k);
    if (it != at.end()) {
      ++hits;
      order.erase(it->second);
    } else if (static_cast<int>(order.size()) == n_slots) {
      at.erase(order.back());
      order.pop_back();
    }
    order.push_front(k);
    at[k] = order.begin();
  }
  return hits;
}

TEST(CachePolicy, LruMatchesTextbookLru) {
  std::mt19937 rng(7);
  for (int n_slots : {1, 3, 16, 64}) {
    std::vector<int32_t> trace(5000);
    // Skewed keys so that both hits and misses are common.
    std::geometric_distribution<int> g(0.05);
    for (int32_t& k : trace) k = g(rng) % 200;
    auto p = make_cache_policy("lru", n_slots, 200);
    EXPECT_EQ(simulate_cache(*p, n_slots, trace), lru_oracle(n_slots, trace)) << n_slots << " slots";
  }
}

// Decoding visits layer after layer: a cycle through more slabs than fit.
// LRU evicts each slab just before its reuse and never hits; a frequency
// policy keeps all but one slot's worth ((C - 1) / N of accesses hit).
TEST(CachePolicy, CyclicWorkingSetLargerThanCache) {
  std::vector<int32_t> trace;
  for (int rep = 0; rep < 200; ++rep)
    for (int k = 0; k < 10; ++k) trace.push_back(k);
  auto lru = make_cache_policy("lru", 5, 10);
  auto lfu = make_cache_policy("lfu-decay", 5, 10);
  EXPECT_EQ(simulate_cache(*lru, 5, trace), 0u);
  const double lfu_rate = static_cast<double>(simulate_cache(*lfu, 5, trace)) / trace.size();
  EXPECT_GT(lfu_rate, 0.3);
  EXPECT_LE(lfu_rate, 0.5);
}

// The decay lets the cache follow a change of hot set: after the switch, the
// new hot keys must win their slots back within a few half-lives.
TEST(CachePolicy, DecayFollowsAPhaseChange) {
  std::mt19937 rng(3);
  std::vector<int32_t> trace;
  std::uniform_int_distribution<int> cold(100, 10000);
  auto phase = [&](int base, int n) {
    for (int i = 0; i < n; ++i) {
      trace.push_back(base + i % 4);             // a hot set of 4
      if (i % 2) trace.push_back(cold(rng));     // one-off keys in between
    }
  };
  phase(0, 4000);
  phase(50, 4000);
  const int n_slots = 6;
  auto lfu = make_cache_policy("lfu-decay", n_slots, 10001);
  // Hits over the second phase's last half only.
  std::vector<int32_t> first(trace.begin(), trace.end() - 3000);
  const uint64_t before = simulate_cache(*lfu, n_slots, first);
  auto lfu2 = make_cache_policy("lfu-decay", n_slots, 10001);
  const uint64_t all = simulate_cache(*lfu2, n_slots, trace);
  const double late_rate = static_cast<double>(all - before) / 3000.0;
  // 2 of 3 accesses are hot there; nearly all of them should hit.
  EXPECT_GT(late_rate, 0.6);
}

// The most hits any cache can get, by trying every choice at every miss
// (keep the newcomer in place of each cached key, or keep none of it), from
// every possible content before the trace starts.
uint64_t exhaustive_optimum(int n_slots, const std::vector<int32_t>& trace, size_t i,
                            std::vector<int32_t>& cache) {
  if (i == trace.size()) return 0;
  const int32_t k = trace[i];
  if (std::find(cache.begin(), cache.end(), k) != cache.end())
    return 1 + exhaustive_optimum(n_slots, trace, i + 1, cache);
  if (static_cast<int>(cache.size()) < n_slots) {
    cache.push_back(k);
    const uint64_t h = exhaustive_optimum(n_slots, trace, i + 1, cache);
    cache.pop_back();
    return h;
  }
  uint64_t best = exhaustive_optimum(n_slots, trace, i + 1, cache);  // keep none of it
  for (size_t s = 0; s < cache.size(); ++s) {
    const int32_t old = cache[s];
    cache[s] = k;
    best = std::max(best, exhaustive_optimum(n_slots, trace, i + 1, cache));
    cache[s] = old;
  }
  return best;
}

// `len` keys drawn uniformly from [0, n_keys).
std::vector<int32_t> uniform_trace(std::mt19937& rng, int n_keys, size_t len) {
  std::vector<int32_t> trace(len);
  std::uniform_int_distribution<int> key(0, n_keys - 1);
  for (int32_t& k : trace) k = key(rng);
  return trace;
}

TEST(CachePolicy, OptimalMatchesExhaustiveSearchAndBoundsEveryPolicy) {
  std::mt19937 rng(11);
  for (int round = 0; round < 300; ++round) {
    const int n_keys = 2 + round % 5, n_slots = 1 + round % 3;
    const std::vector<int32_t> trace = uniform_trace(rng, n_keys, 6 + round % 9);
    uint64_t best = 0;
    for (uint32_t mask = 0; mask < (1u << n_keys); ++mask) {
      if (std::popcount(mask) > n_slots) continue;
      std::vector<int32_t> cache;
      for (int k = 0; k < n_keys; ++k)
        if ((mask >> k) & 1) cache.push_back(k);
      best = std::max(best, exhaustive_optimum(n_slots, trace, 0, cache));
    }
    ASSERT_EQ(simulate_optimal(n_slots, trace), best) << "round " << round;
    for (const char* p : {"lru", "lfu-decay"})
      EXPECT_LE(simulate_cache(p, n_slots, n_keys, trace), best) << p << " round " << round;
    // The best fixed set: every subset of n_slots keys.
    uint64_t fixed = 0;
    for (uint32_t mask = 0; mask < (1u << n_keys); ++mask) {
      if (std::popcount(mask) > n_slots) continue;
      uint64_t h = 0;
      for (int32_t k : trace) h += (mask >> k) & 1;
      fixed = std::max(fixed, h);
    }
    EXPECT_EQ(simulate_fixed_set(n_slots, trace), fixed) << "round " << round;
    EXPECT_LE(fixed, best) << "round " << round;
  }
}

// The set learned on a prefix: the n_slots keys most used before `split`
// (ties to the lower key), scored on the rest, against a count by hand; never
// above the rest's own best fixed set; and on a stationary workload whose
// popularity is known, close to it once the prefix is long.
TEST(CachePolicy, LearnedSetCountsThePrefixAndScoresTheRest) {
  std::mt19937 rng(13);
  for (int round = 0; round < 300; ++round) {
    const int n_keys = 2 + round % 7, n_slots = 1 + round % 4;
    const std::vector<int32_t> trace = uniform_trace(rng, n_keys, 4 + round % 23);
    const size_t split = round % (trace.size() + 1);
    std::vector<int> count(n_keys, 0);
    for (size_t i = 0; i < split; ++i) ++count[trace[i]];
    std::vector<char> held(n_keys, 0);
    for (int s = 0; s < n_slots; ++s) {
      int best = -1;
      for (int k = 0; k < n_keys; ++k)
        if (!held[k] && count[k] > 0 && (best < 0 || count[k] > count[best])) best = k;
      if (best >= 0) held[best] = 1;
    }
    uint64_t want = 0;
    for (size_t i = split; i < trace.size(); ++i) want += held[trace[i]];
    ASSERT_EQ(simulate_learned_set(n_slots, trace, split), want) << "round " << round;
    const std::span<const int32_t> rest = std::span<const int32_t>(trace).subspan(split);
    EXPECT_LE(want, simulate_fixed_set(n_slots, rest)) << "round " << round;
  }
  // 64 keys, the first 16 three times as popular as the rest: 10000 uses
  // teach the hot set, which then serves about its share of the next 10000.
  std::vector<int32_t> trace(20000);
  std::vector<double> weight(64, 1.0);
  for (int k = 0; k < 16; ++k) weight[k] = 3.0;
  std::discrete_distribution<int> pop(weight.begin(), weight.end());
  for (int32_t& k : trace) k = pop(rng);
  const double learned = static_cast<double>(simulate_learned_set(16, trace, 10000)) / 10000.0;
  EXPECT_NEAR(learned, 48.0 / 96.0, 0.02);
  EXPECT_EQ(simulate_learned_set(16, trace, 0), 0u);  // nothing seen, nothing held
}

// A routing history as lfu-decay's prior: on a stationary skewed workload
// the cache serves more from the first accesses on (it need not learn the
// hot set again), and after a change of hot set the new keys still win their
// slots back: the prior counts one half-life of uses, not more.
TEST(CachePolicy, HistoryPriorHelpsAtOnceAndStillFollowsAChange) {
  const int n_keys = 400, n_slots = 40;
  std::geometric_distribution<int> g(0.03);
  auto workload = [&](uint32_t seed, int n, int shift) {
    std::mt19937 rng(seed);
    std::vector<int32_t> t(n);
    for (int32_t& k : t) k = (g(rng) + shift) % n_keys;
    return t;
  };
  const std::vector<int32_t> before = workload(1, 20000, 0);
  std::vector<uint64_t> history(n_keys, 0);
  for (int32_t k : before) ++history[k];
  const std::vector<int32_t> now = workload(2, 4000, 0);
  const std::vector<int32_t> first(now.begin(), now.begin() + 800);
  const uint64_t cold_first = simulate_cache("lfu-decay", n_slots, n_keys, first);
  const uint64_t warm_first = simulate_cache("lfu-decay", n_slots, n_keys, first, history);
  EXPECT_GT(warm_first, cold_first + cold_first / 20) << "the prior should show in the first accesses";
  EXPECT_GE(simulate_cache("lfu-decay", n_slots, n_keys, now, history),
            simulate_cache("lfu-decay", n_slots, n_keys, now));
  // lru takes no prior.
  EXPECT_EQ(simulate_cache("lru", n_slots, n_keys, now, history), simulate_cache("lru", n_slots, n_keys, now));

  // The text moves on: the hot keys are others now (shifted by 200).
  std::vector<int32_t> moved = workload(3, 30000, 200);
  const uint64_t all = simulate_cache("lfu-decay", n_slots, n_keys, moved, history);
  const std::vector<int32_t> head(moved.begin(), moved.end() - 5000);
  const uint64_t early = simulate_cache("lfu-decay", n_slots, n_keys, head, history);
  std::vector<int32_t> tail(moved.end() - 5000, moved.end());
  const double late_rate = static_cast<double>(all - early) / 5000.0;
  const double best_late = static_cast<double>(simulate_fixed_set(n_slots, tail)) / 5000.0;
  EXPECT_GT(late_rate, 0.8 * best_late) << "the cache should have followed the new hot set";
}

TEST(CachePolicy, UnknownNameIsAnError) {
  try {
    make_cache_policy("fifo", 4, 4);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("lfu-decay"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace colibri
