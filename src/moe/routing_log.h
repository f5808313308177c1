// Routing logs: the experts every generated token used, one line per token,
// written by `colibri run --routing-out` and replayed by `colibri plan
// --routing-trace` to see what a budget and each cache policy would give on a
// real workload (and how far any policy could go: cache_policy.h's bounds).
//
// Text: a header line "# colibri routing log: n_layer L n_expert E", then per
// token one line of L space-separated fields, each the comma-separated
// experts the layer used in routing order, or "-" for a layer without routed
// experts.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace colibri {

std::string routing_log_header(int n_layer, int n_expert);
// One token's line (with its newline) from its (n_layer, k) expert ids, -1
// in dense layers.
std::string routing_log_line(const int32_t* ids, int n_layer, int k);

struct RoutingLog {
  int n_layer = 0, n_expert = 0;
  int64_t n_tokens = 0;
  std::vector<int32_t> keys;  // layer * n_expert + expert, in the order a token's layers use them
};

// Throws Error naming the file and line on anything malformed (a missing
// header, a field that is not an expert of the stated shape, the wrong number
// of layers).
// progress, if given, is called now and then with (done, total): bytes of
// the file read, or uses replayed over all simulations (a long log takes a
// while: colibri plan shows it).
using RoutingProgress = std::function<void(uint64_t done, uint64_t total)>;
RoutingLog read_routing_log(const std::string& path, const RoutingProgress& progress = {});

// The share of a log's expert uses a cache would serve from memory: the
// `pinned` keys always, the others through `n_slots` slots under each policy
// (no prefetch: every miss is a read; the pinned keys loaded beforehand;
// `history`, the routing counts the store would start from, or empty), then
// the bounds over all n_pinned + n_slots slots ("best fixed set",
// "optimal"; cache_policy.h). Each also for the second half of the log's
// uses alone (`late`: the policies carry on from the first half; the bounds
// know that half in advance), beside what a fixed set learned on the first
// half serves of the second (simulate_learned_set).
struct PolicyReplay {
  std::string name;
  double served = 0;  // in [0, 1]
  double late = 0;    // in [0, 1], of the second half's uses
};
struct Replay {
  std::vector<PolicyReplay> rows;  // lru, lfu-decay, best fixed set, optimal
  double learned_late = 0;         // in [0, 1], of the second half's uses
};
Replay replay_policies(const RoutingLog& log, int n_slots, std::span<const int32_t> pinned,
                       std::span<const uint64_t> history = {}, const RoutingProgress& progress = {});

}  // namespace colibri
