// What `colibri bench` measures beside the clock: the weight bytes a decoded
// token reads, and the machine's streaming read bandwidth (the roofline).
#pragma once

#include <cstddef>

#include "model/config.h"
#include "model/weights.h"

namespace colibri {

// Bytes of weights one generated token reads: every dense tensor except the
// token embedding table, of which one row, plus n_expert_used expert slabs in
// each MoE layer (the count `colibri inspect` prints).
double decode_bytes_per_token(const ModelConfig& c, const ModelWeights& w);

// Streaming read bandwidth in bytes/s: n_threads threads sum their slices of
// a buffer of `bytes` bytes (touched first, so no page faults are timed);
// the best of `passes`. The buffer should be several times the last-level cache.
double probe_read_bandwidth(int n_threads, size_t bytes, int passes = 5);

}  // namespace colibri
