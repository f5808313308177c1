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

// Streaming read bandwidth in bytes/s, the roofline decode is measured
// against: n_threads threads sum their contiguous shares of a buffer of
// `bytes` bytes (written first, so no page faults are timed) with the
// widest loads the CPU has (tensor/ops.h read_sum: four independent 512-bit
// sums on AVX-512), each share read as one stream and as `kProbeStreams`
// interleaved streams; the median of `passes` passes of each way, the faster
// of the two. The buffer should be several times the last-level cache.
// bench/RESULTS.md compares it with likwid-bench's load_avx512.
constexpr int kProbeStreams = 4;
struct ReadProbe {
  double bytes_per_s = 0;      // the faster median
  double one_stream = 0;       // median, one stream per thread
  double streams = 0;          // median, kProbeStreams streams per thread
};
ReadProbe probe_read(int n_threads, size_t bytes, int passes = 7);

// The machine's int8 multiply-accumulate peak in MAC/s on n_threads threads
// (tensor/ops.h int8_peak: independent vpdpbusd chains on AVX-512 VNNI), the
// median of `passes`: what prompt speed is measured against.
double probe_int8_peak(int n_threads, int passes = 5);

// Multiply-accumulates of weights one prompt token costs: every dense
// matrix of every layer (attention, routers, shared experts, dense FFNs)
// and n_expert_used experts per MoE layer; not the output matrix (a prompt
// needs it for its last token only) nor attention over the context.
double prompt_macs_per_token(const ModelConfig& c, const ModelWeights& w);
double probe_read_bandwidth(int n_threads, size_t bytes, int passes = 7);

}  // namespace colibri
