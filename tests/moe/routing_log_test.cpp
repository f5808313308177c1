// Routing logs: what `colibri run --routing-out` writes reads back as the
// same acquire order, malformed files are errors naming file and line, and
// a replay agrees with the cache simulations it is made of.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>

#include "base/error.h"
#include "moe/cache_policy.h"
#include "moe/routing_log.h"

namespace colibri {
namespace {

namespace fs = std::filesystem;

std::string temp_file(const std::string& name, const std::string& text) {
  const std::string path = (fs::temp_directory_path() / ("colibri_routing_" + std::to_string(::getpid()) + "_" + name)).string();
  std::ofstream(path) << text;
  return path;
}

TEST(RoutingLog, WrittenLinesReadBackInAcquireOrder) {
  const int n_layer = 3, n_expert = 40, k = 4;
  std::mt19937 rng(5);
  std::string text = routing_log_header(n_layer, n_expert);
  std::vector<int32_t> want;
  for (int t = 0; t < 20; ++t) {
    std::vector<int32_t> ids(n_layer * k, -1);
    for (int l = 0; l < n_layer; ++l) {
      if (l == 1 && t % 2) continue;  // a dense layer on odd tokens
      for (int j = 0; j < k; ++j) {
        ids[l * k + j] = static_cast<int32_t>(rng() % n_expert);
        want.push_back(l * n_expert + ids[l * k + j]);
      }
    }
    text += routing_log_line(ids.data(), n_layer, k);
  }
  const std::string path = temp_file("ok", text);
  const RoutingLog log = read_routing_log(path);
  EXPECT_EQ(log.n_layer, n_layer);
  EXPECT_EQ(log.n_expert, n_expert);
  EXPECT_EQ(log.n_tokens, 20);
  EXPECT_EQ(log.keys, want);
  fs::remove(path);
}

TEST(RoutingLog, MalformedFilesNameFileAndLine) {
  const std::string head = "# colibri routing log: n_layer 2 n_expert 8\n";
  const struct {
    const char* name;
    std::string text;
    const char* says;
  } cases[] = {
      {"empty", "", ":1: not a routing log"},
      {"header", "# something else\n1 2\n", ":1: not a routing log"},
      {"range", head + "1,2 3,8\n", ":2: layer 1: '3,8' is not an expert in [0, 8)"},
      {"negative", head + "1 -2\n", ":2: layer 1"},
      {"junk", head + "1 2\n1 2x\n", ":3: layer 1"},
      {"empty field", head + "1,,2 3\n", ":2: layer 0"},
      {"too many", head + "1 2 3\n", ":2: more than 2 layers"},
      {"too few", head + "1\n", ":2: 1 layers, the header says 2"},
  };
  for (const auto& c : cases) {
    const std::string path = temp_file(c.name, c.text);
    try {
      read_routing_log(path);
      ADD_FAILURE() << c.name << ": no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(path + c.says), std::string::npos) << c.name << ": " << e.what();
    }
    fs::remove(path);
  }
  EXPECT_THROW(read_routing_log("/nonexistent/colibri.routing"), Error);
}

// Random byte edits of a valid log: each one parses or is an Error, and what
// parses names only experts of the stated shape.
TEST(RoutingLog, MutatedFilesParseOrFailCleanly) {
  const int n_layer = 4, n_expert = 12, k = 2;
  std::string text = routing_log_header(n_layer, n_expert);
  std::mt19937 rng(13);
  for (int t = 0; t < 6; ++t) {
    int32_t ids[n_layer * k];
    for (int32_t& e : ids) e = static_cast<int32_t>(rng() % n_expert);
    text += routing_log_line(ids, n_layer, k);
  }
  const char alphabet[] = "0123456789,- \n#x";
  for (int round = 0; round < 2000; ++round) {
    std::string m = text;
    for (int e = 0; e < 1 + round % 4; ++e) {
      const size_t at = rng() % m.size();
      switch (rng() % 3) {
        case 0: m[at] = alphabet[rng() % (sizeof(alphabet) - 1)]; break;
        case 1: m.erase(at, 1 + rng() % 3); break;
        default: m.insert(at, 1, alphabet[rng() % (sizeof(alphabet) - 1)]); break;
      }
      if (m.empty()) m = "\n";
    }
    const std::string path = temp_file("fuzz", m);
    try {
      const RoutingLog log = read_routing_log(path);
      for (int32_t key : log.keys) ASSERT_TRUE(key >= 0 && key < log.n_layer * log.n_expert) << m;
    } catch (const Error&) {
    }
    fs::remove(path);
  }
}

TEST(RoutingLog, ReplayCountsPinnedUsesAndBoundsThePolicies) {
  RoutingLog log;
  log.n_layer = 2;
  log.n_expert = 16;
  std::mt19937 rng(9);
  std::geometric_distribution<int> g(0.15);
  for (int t = 0; t < 300; ++t, ++log.n_tokens)
    for (int l = 0; l < 2; ++l)
      for (int j = 0; j < 2; ++j) log.keys.push_back(l * 16 + g(rng) % 16);
  const std::vector<int32_t> pinned = {0, 16};  // the hottest expert of each layer
  const Replay replay = replay_policies(log, 5, pinned);
  const auto& r = replay.rows;
  ASSERT_EQ(r.size(), 4u);
  std::vector<int32_t> rest;
  uint64_t pinned_uses = 0;
  for (int32_t k : log.keys) (k == 0 || k == 16) ? ++pinned_uses : (rest.push_back(k), 0);
  const double n = static_cast<double>(log.keys.size());
  EXPECT_EQ(r[0].name, "lru");
  EXPECT_DOUBLE_EQ(r[0].served, (pinned_uses + simulate_cache("lru", 5, 32, rest)) / n);
  EXPECT_EQ(r[1].name, "lfu-decay");
  EXPECT_DOUBLE_EQ(r[1].served, (pinned_uses + simulate_cache("lfu-decay", 5, 32, rest)) / n);
  EXPECT_DOUBLE_EQ(r[2].served, simulate_fixed_set(7, log.keys) / n);
  EXPECT_DOUBLE_EQ(r[3].served, simulate_optimal(7, log.keys) / n);
  for (int i = 0; i < 3; ++i) EXPECT_LE(r[i].served, r[3].served + 1e-12) << r[i].name;

  // The second half of the uses (600 of 1200): lru carried on from the first
  // half, counted by hand; the bounds and the learned set on that half.
  const size_t split = log.keys.size() / 2;
  const std::span<const int32_t> late = std::span<const int32_t>(log.keys).subspan(split);
  const double nl = static_cast<double>(late.size());
  uint64_t late_hits = 0;
  std::vector<int32_t> slots;  // keys in the 5 slots, least recent first
  for (size_t i = 0; i < log.keys.size(); ++i) {
    const int32_t k = log.keys[i];
    bool hit = k == 0 || k == 16;
    if (!hit) {
      auto it = std::find(slots.begin(), slots.end(), k);
      hit = it != slots.end();
      if (hit) slots.erase(it);
      else if (slots.size() == 5) slots.erase(slots.begin());
      slots.push_back(k);
    }
    if (i >= split) late_hits += hit;
  }
  EXPECT_DOUBLE_EQ(r[0].late, late_hits / nl);
  EXPECT_DOUBLE_EQ(r[2].late, simulate_fixed_set(7, late) / nl);
  EXPECT_DOUBLE_EQ(r[3].late, simulate_optimal(7, late) / nl);
  EXPECT_DOUBLE_EQ(replay.learned_late, simulate_learned_set(7, log.keys, split) / nl);
  EXPECT_LE(replay.learned_late, r[2].late + 1e-12);
  for (int i = 0; i < 3; ++i) EXPECT_LE(r[i].late, r[3].late + 1e-12) << r[i].name;
}

}  // namespace
}  // namespace colibri
