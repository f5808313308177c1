#include "server/stats_feed.h"

#include <charconv>

#include "base/error.h"
#include "base/sys.h"
#include "engine/engine.h"
#include "server/api.h"
#include "server/scheduler.h"

namespace colibri::server {

using json = nlohmann::ordered_json;

namespace {

// One letter per slab keeps a 256-expert layer's row short on the wire.
char residency_letter(Residency r) {
  switch (r) {
    case Residency::kPinned: return 'p';
    case Residency::kCached: return 'c';
    case Residency::kLoading: return 'l';
    case Residency::kOnDisk: return 'd';
    case Residency::kMapped: return 'm';
  }
  return '?';
}

}  // namespace

StatsFeed::StatsFeed(Engine& engine, Scheduler& scheduler, std::string model_id)
    : engine_(engine), scheduler_(scheduler), model_id_(std::move(model_id)),
      started_(now_seconds()) {
  // From the file's tensor table, not Engine::weights(), which would wait for
  // the dense weights still loading in the background.
  const ModelConfig& c = engine.config();
  if (c.is_moe())
    for (int l = 0; l < c.n_layer; ++l)
      if (engine.file().find_tensor(strprintf("blk.%d.ffn_gate_inp.weight", l)))
        moe_layers_.push_back(l);
}

int StatsFeed::parse_interval_ms(const std::string& value) {
  if (value.empty()) return kStatsDefaultIntervalMs;
  int ms = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), ms);
  if (ec != std::errc() || end != value.data() + value.size() || ms < kStatsMinIntervalMs ||
      ms > kStatsMaxIntervalMs)
    throw bad_request(strprintf("interval_ms must be an integer from %d to %d", kStatsMinIntervalMs,
                                kStatsMaxIntervalMs),
                      "interval_ms");
  return ms;
}

std::string StatsFeed::render(Scratch& scratch) const {
  const double cpu0 = thread_cpu_seconds();
  std::string text = dump(snapshot(scratch));
  ++snapshots_;
  snapshot_cpu_ns_ += static_cast<uint64_t>(1e9 * (thread_cpu_seconds() - cpu0));
  return text;
}

json StatsFeed::snapshot(Scratch& scratch) const {
  const ModelConfig& c = engine_.config();
  const SchedulerStats s = scheduler_.stats();
  const Plan& plan = engine_.plan();
  const size_t n_expert = static_cast<size_t>(std::max(c.n_expert, 1));
  const size_t n_keys = static_cast<size_t>(c.n_layer) * n_expert;
  scratch.uses.resize(n_keys);
  scratch.experts.resize(n_keys);
  scheduler_.expert_usage(scratch.uses);
  const double l0 = now_seconds();
  const bool per_expert = c.is_moe() && engine_.store().expert_counters(scratch.experts);
  store_lock_ns_ += static_cast<uint64_t>(1e9 * (now_seconds() - l0));

  json layers = json::array();
  for (int l : moe_layers_) {
    json uses = json::array(), hits = json::array(), misses = json::array(),
         bytes = json::array();
    std::string where;
    for (size_t e = 0; e < n_expert; ++e) {
      const size_t key = static_cast<size_t>(l) * n_expert + e;
      const ExpertCounters& x = scratch.experts[key];
      uses.push_back(scratch.uses[key]);
      hits.push_back(per_expert ? x.hits : 0);
      misses.push_back(per_expert ? x.misses : 0);
      bytes.push_back(per_expert ? x.bytes_read : 0);
      where += residency_letter(per_expert ? x.where : Residency::kMapped);
    }
    layers.push_back(json{{"layer", l},
                          {"uses", std::move(uses)},
                          {"hits", std::move(hits)},
                          {"misses", std::move(misses)},
                          {"bytes_read", std::move(bytes)},
                          {"where", std::move(where)}});
  }
  const ExpertStoreStats& st = s.store;
  json out{
      {"object", "colibri.stats"},
      {"model", model_id_},
      {"uptime_s", now_seconds() - started_},
      {"n_layer", c.n_layer},
      {"n_expert", c.n_expert},
      {"n_expert_used", c.n_expert_used},
      {"store", engine_.store().name()},
      {"requests",
       {{"slots", s.n_slots},
        {"slots_busy", s.slots_busy},
        {"queue_depth", s.queue_depth},
        {"completions", s.jobs_done}}},
      {"tokens",
       {{"prompt", s.prompt_tokens},
        {"cached", s.cached_tokens},
        {"generated", s.gen_tokens},
        {"generated_per_s", s.gen_tokens_per_s},
        {"forward_steps", s.steps},
        {"forward_s", s.busy_s}}},
      {"cache",
       {{"requests", st.requests},
        {"hits", st.hits},
        {"hit_rate", st.requests ? static_cast<double>(st.hits) / st.requests : 1.0},
        {"bytes_read", st.bytes_read},
        {"loads", st.loads},
        {"prefetch_loads", st.prefetch_loads},
        {"guessed_loads", st.pred_loads},
        {"guessed_loads_used", st.pred_loads_used},
        {"warm_loads", st.warm_loads},
        {"warm_done_s", st.warm_done_s},
        {"evictions", st.evictions},
        {"slots", st.cache_slots},
        {"slots_given_back", st.slots_given_back},
        {"io_wait_s", st.io_wait_s},
        {"read_busy_s", st.read_busy_s},
        {"read_into_fresh_bytes", st.read_faulted}}},
      {"memory",
       {{"rss", current_rss_bytes()},
        {"budget", plan.budget},
        {"budget_source", plan.budget_source},
        {"planned", plan.used_bytes()},
        {"fixed_overhead", plan.fixed_overhead}}},
      {"plan",
       {{"dense_bytes", plan.dense_bytes},
        {"other_bytes", plan.other_bytes},
        {"slab_bytes", plan.slab_bytes},
        {"n_slots", plan.n_slots},
        {"n_slots_full_context", plan.n_slots_full},
        {"kv_bytes_full_context", plan.kv_bytes},
        {"n_pinned", plan.n_pinned},
        {"all_experts_fit", plan.all_experts_fit},
        {"policy", plan.policy},
        {"prefetch", plan.prefetch},
        {"expected_hit_rate", plan.hit_rate},
        {"expected_disk_bytes_per_token", plan.disk_bytes_per_token}}},
      {"layers", std::move(layers)}};
  // What rendering this one costs is in the next one's figures.
  out["feed"] = json{{"snapshots", snapshots_.load()},
                     {"snapshot_cpu_s", 1e-9 * static_cast<double>(snapshot_cpu_ns_.load())},
                     {"store_lock_s", 1e-9 * static_cast<double>(store_lock_ns_.load())},
                     {"usage_copy_s", s.usage_copy_s}};
  return out;
}

}  // namespace colibri::server
