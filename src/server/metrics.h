// /metrics in the Prometheus text format (version 0.0.4).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "server/scheduler.h"

namespace colibri::server {

// HTTP-side counters, updated by the HTTP threads.
class HttpCounters {
 public:
  void count(const std::string& path, int status) {
    std::lock_guard<std::mutex> lock(mu_);
    ++by_path_status_[{path, status}];
  }
  std::map<std::pair<std::string, int>, uint64_t> snapshot() const {
    std::lock_guard<std::mutex> lock(mu_);
    return by_path_status_;
  }

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> by_path_status_;
};

std::string prometheus_text(const SchedulerStats& s,
                            const std::map<std::pair<std::string, int>, uint64_t>& requests,
                            uint64_t rss_bytes);

}  // namespace colibri::server
