// The figures behind the web page's expert map and gauges:
// GET /v1/colibri/stats (one JSON object) and /v1/colibri/stats/stream (the
// same object as an SSE event every interval).
//
// The forward pass only counts (Transformer::expert_usage: one increment per
// routed token; the expert store's per-slab hits, misses and bytes); the
// scheduler copies the usage counts once per step into a buffer sized at
// start. Everything else (reading the store's table, building the JSON)
// happens on the HTTP thread that asked, at the interval the client chose, so
// an open page costs the decode loop one small copy per step.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "moe/expert_store.h"

namespace colibri {
class Engine;
}

namespace colibri::server {

class Scheduler;

// Streams refuse intervals outside this range (400): faster would cost the
// server for nothing a person can see, slower is what /stats is for.
constexpr int kStatsMinIntervalMs = 50;
constexpr int kStatsMaxIntervalMs = 10000;
constexpr int kStatsDefaultIntervalMs = 250;

class StatsFeed {
 public:
  StatsFeed(Engine& engine, Scheduler& scheduler, std::string model_id);

  // One snapshot. Safe from any thread; each caller passes its own scratch
  // so that concurrent streams do not share buffers.
  struct Scratch {
    std::vector<uint64_t> uses;           // (n_layer, n_expert)
    std::vector<ExpertCounters> experts;  // (n_layer, n_expert)
  };
  nlohmann::ordered_json snapshot(Scratch& scratch) const;
  // The snapshot as JSON text, its cost counted under "feed".
  std::string render(Scratch& scratch) const;

  // The query's interval ("" -> the default); throws ApiError (400) on
  // anything but an integer in [kStatsMinIntervalMs, kStatsMaxIntervalMs].
  static int parse_interval_ms(const std::string& value);

 private:
  Engine& engine_;
  Scheduler& scheduler_;
  std::string model_id_;
  std::vector<int> moe_layers_;  // layers with routed experts
  double started_ = 0;
  // What the feed itself costs (reported under "feed"): snapshots taken,
  // the CPU time of the threads that took them, and the time spent in the
  // store's counters call, which holds the lock the forward pass's expert
  // acquires take (in nanoseconds).
  mutable std::atomic<uint64_t> snapshots_{0}, snapshot_cpu_ns_{0}, store_lock_ns_{0};
};

}  // namespace colibri::server
