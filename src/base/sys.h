// Process facts the summaries report.
#pragma once

#include <cstdint>

namespace colibri {

// Peak resident set size of this process (VmHWM), in bytes; 0 if unknown.
uint64_t peak_rss_bytes();
// Current resident set size (VmRSS), in bytes; 0 if unknown.
uint64_t current_rss_bytes();
// Monotonic seconds.
double now_seconds();

}  // namespace colibri
