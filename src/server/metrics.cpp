#include "server/metrics.h"

#include "base/error.h"

namespace colibri::server {

namespace {

void metric(std::string& out, const char* name, const char* type, const char* help, double v) {
  out += strprintf("# HELP %s %s\n# TYPE %s %s\n%s %.17g\n", name, help, name, type, name, v);
}

// Label values are paths we routed or 404s; escape what the format requires.
std::string label(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

}  // namespace

std::string prometheus_text(const SchedulerStats& s,
                            const std::map<std::pair<std::string, int>, uint64_t>& requests,
                            uint64_t rss_bytes) {
  std::string out;
  out +=
      "# HELP colibri_requests_total HTTP requests answered, by path and status.\n"
      "# TYPE colibri_requests_total counter\n";
  for (const auto& [key, n] : requests)
    out += strprintf("colibri_requests_total{path=\"%s\",status=\"%d\"} %llu\n",
                     label(key.first).c_str(), key.second, static_cast<unsigned long long>(n));
  metric(out, "colibri_completions_total", "counter", "Generations finished.", s.jobs_done);
  metric(out, "colibri_completions_cancelled_total", "counter",
         "Generations stopped because the client went away.", s.jobs_cancelled);
  metric(out, "colibri_prompt_tokens_total", "counter", "Prompt tokens evaluated.",
         s.prompt_tokens);
  metric(out, "colibri_prompt_tokens_cached_total", "counter",
         "Prompt tokens whose KV came from the prefix cache.", s.cached_tokens);
  metric(out, "colibri_generated_tokens_total", "counter", "Tokens generated.", s.gen_tokens);
  metric(out, "colibri_generation_tokens_per_second", "gauge",
         "Tokens generated per second over the last seconds, all requests together.",
         s.gen_tokens_per_s);
  metric(out, "colibri_queue_depth", "gauge", "Requests waiting for a slot.", s.queue_depth);
  metric(out, "colibri_slots", "gauge", "Sequences decoded together at most.", s.n_slots);
  metric(out, "colibri_slots_busy", "gauge", "Sequences prefilling or decoding.", s.slots_busy);
  metric(out, "colibri_forward_steps_total", "counter", "Batched forward passes.", s.steps);
  metric(out, "colibri_forward_tokens_total", "counter", "Tokens over all forward passes.",
         s.batch_tokens);
  metric(out, "colibri_forward_seconds_total", "counter", "Time spent in forward passes.",
         s.busy_s);
  metric(out, "colibri_expert_requests_total", "counter", "Routed-expert weight lookups.",
         s.store.requests);
  metric(out, "colibri_expert_cache_hits_total", "counter",
         "Expert lookups served without waiting for a load.", s.store.hits);
  metric(out, "colibri_expert_cache_hit_ratio", "gauge", "Expert cache hits over lookups.",
         s.store.requests ? static_cast<double>(s.store.hits) / s.store.requests : 1.0);
  metric(out, "colibri_expert_disk_bytes_read_total", "counter",
         "Bytes of expert weights read from disk by the expert store.", s.store.bytes_read);
  metric(out, "colibri_expert_io_wait_seconds_total", "counter",
         "Time spent waiting for expert loads.", s.store.io_wait_s);
  metric(out, "colibri_resident_memory_bytes", "gauge", "Resident set size of the process.",
         rss_bytes);
  return out;
}

}  // namespace colibri::server
