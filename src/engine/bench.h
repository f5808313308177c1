// What `colibri bench` measures beside the clock: the weight bytes a decoded
// token reads, and the machine's streaming read bandwidth (the roofline).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/aligned_buffer.h"
#include "base/thread_pool.h"
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

// The probe's buffer and threads kept for passes on demand: `colibri bench`
// reads it again around every timed decode, so each repeat is measured
// against the bandwidth of its own minutes (this VM's varies with its
// neighbours by a factor of two over an hour).
class BandwidthProbe {
 public:
  BandwidthProbe(int n_threads, size_t bytes);
  ~BandwidthProbe();
  BandwidthProbe(const BandwidthProbe&) = delete;
  BandwidthProbe& operator=(const BandwidthProbe&) = delete;
  double pass(int streams);  // bytes/s of one pass
  double median(int streams, int passes);
  ReadProbe measure(int passes);

 private:
  static constexpr size_t kBlock = 4096;
  ThreadPool pool_;
  int n_threads_;
  size_t share_ = 0, words_ = 0;
  AlignedBuffer<uint64_t> buf_;
  std::vector<uint64_t> sums_;
  uint64_t passes_ = 0;
};

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

// A traced stretch of decode steps (ThreadPool's JobTrace), summed by job
// name (bench_profile.cpp).
struct JobKind {
  std::string what;
  double jobs = 0, seconds = 0, bytes = 0;
  double macs = 0;             // multiply-accumulates of the weight products
  double idle_s = 0;           // a thread out of chunks before the job's end
  double gap_before_s = 0;     // the calling thread alone before these jobs
  double loads_only_gb_s = 0;  // the replay's rate on the same job sizes
};
struct DecodeProfile {
  int n_tokens = 0, n_threads = 0;
  double step_s = 0;  // wall time per token
  double jobs_per_token = 0;
  double in_jobs_s = 0;        // per token, inside parallel jobs
  double gaps_s = 0;           // per token, between them
  std::vector<JobKind> kinds;  // by time spent, most first
  // The jobs of `replay_tokens` tokens again, each reading as many bytes of
  // fresh memory with the probe's loads (read_sum) and split the same way:
  // per token back to back, and with each recorded gap spent first.
  double replay_tokens = 0, replay_bytes_per_token = 0;
  double replay_jobs_s = 0, replay_step_s = 0;
  uint64_t replay_checksum = 0;
};
DecodeProfile summarize_trace(const JobTrace& trace, int n_tokens, double wall_s, int n_threads);
// Jobs [first, first + count) of the trace replayed as above; fills p's
// replay fields and each kind's loads_only_gb_s.
void replay_loads_only(const JobTrace& trace, size_t first, size_t count, int n_threads,
                       DecodeProfile& p);

}  // namespace colibri
