#include "engine/bench.h"

#include <algorithm>
#include <numeric>
#include <vector>

#include "base/aligned_buffer.h"
#include "base/error.h"
#include "base/sys.h"
#include "base/thread_pool.h"
#include "tensor/ops.h"

namespace colibri {

double decode_bytes_per_token(const ModelConfig& c, const ModelWeights& w) {
  double b = static_cast<double>(w.dense_bytes) -
             static_cast<double>(w.token_embd.n_rows() * w.token_embd.row_stride()) +
             static_cast<double>(w.token_embd.row_stride());
  // Tied embeddings: the output head reads the whole table.
  if (w.output.data == w.token_embd.data)
    b += static_cast<double>(w.output.n_rows() * w.output.row_stride());
  for (int l = 0; l < c.n_layer; ++l)
    if (w.experts[l].gate_exps.data)
      b += static_cast<double>(w.experts[l].slab_bytes()) * c.n_expert_used;
  return b;
}

ReadProbe probe_read(int n_threads, size_t bytes, int passes) {
  BandwidthProbe probe(n_threads, bytes);
  return probe.measure(passes);
}

BandwidthProbe::BandwidthProbe(int n_threads, size_t bytes)
    : pool_(std::max(n_threads, 1)), n_threads_(n_threads) {
  CLB_CHECK(n_threads >= 1 && bytes >= (size_t{1} << 20),
            "bandwidth probe: needs a thread and at least 1 MiB (got %d, %zu)", n_threads, bytes);
  // Whole 4 KiB blocks per thread, so every stream's blocks are 256-byte multiples.
  const size_t blocks_per_thread = bytes / kBlock / static_cast<size_t>(n_threads);
  CLB_CHECK(blocks_per_thread >= kProbeStreams,
            "bandwidth probe: %zu bytes is too small for %d threads", bytes, n_threads);
  share_ = blocks_per_thread * kBlock;
  words_ = share_ * static_cast<size_t>(n_threads) / 8;
  buf_.resize(words_);
  // Every page written before any pass (no page fault is timed), each thread
  // its own share, as it reads it.
  pool_.parallel_for(n_threads, 1, [&](int64_t t0, int64_t t1, int) {
    for (int64_t t = t0; t < t1; ++t)
      for (size_t i = t * share_ / 8; i < (t + 1) * share_ / 8; ++i)
        buf_[i] = static_cast<uint64_t>(i);
  });
  sums_.assign(n_threads, 0);
}

double BandwidthProbe::pass(int streams) {
  const double t0 = now_seconds();
  // Each thread reads its share front to back in one stream, or as
  // `streams` sub-ranges a block of each in turn.
  pool_.parallel_for(n_threads_, 1, [&](int64_t t0_, int64_t t1_, int) {
    for (int64_t t = t0_; t < t1_; ++t) {
      const uint8_t* base =
          reinterpret_cast<const uint8_t*>(buf_.data()) + static_cast<size_t>(t) * share_;
      uint64_t s = 0;
      if (streams == 1) {
        s = read_sum(base, share_);
      } else {
        const size_t sub = share_ / kBlock / streams * kBlock;
        for (size_t at = 0; at < sub; at += kBlock)
          for (int k = 0; k < streams; ++k) s += read_sum(base + k * sub + at, kBlock);
        s += read_sum(base + streams * sub, share_ - streams * sub);  // the remainder
      }
      sums_[t] += s;
    }
  });
  const double r = static_cast<double>(share_ * n_threads_) / (now_seconds() - t0);
  ++passes_;
  return r;
}

double BandwidthProbe::median(int streams, int passes) {
  std::vector<double> r;
  for (int i = 0; i < passes; ++i) r.push_back(pass(streams));
  std::sort(r.begin(), r.end());
  return r[r.size() / 2];
}

ReadProbe BandwidthProbe::measure(int passes) {
  CLB_CHECK(passes >= 1, "bandwidth probe: needs a pass");
  ReadProbe p;
  p.one_stream = median(1, passes);
  p.streams = median(kProbeStreams, passes);
  p.bytes_per_s = std::max(p.one_stream, p.streams);
  return p;
}

BandwidthProbe::~BandwidthProbe() {
  // Each pass adds sum(0..n-1) in total: using the sums keeps the reads from
  // being optimised away, and checks that every word was read.
  const uint64_t per_pass = static_cast<uint64_t>(words_) * (words_ - 1) / 2;
  CLB_ASSERT(std::accumulate(sums_.begin(), sums_.end(), uint64_t{0}) ==
             per_pass * static_cast<uint64_t>(passes_));
}

double probe_int8_peak(int n_threads, int passes) {
  CLB_CHECK(n_threads >= 1 && passes >= 1, "int8 peak: needs a thread and a pass");
  ThreadPool pool(n_threads);
  // In many small chunks, claimed as threads come, so a thread the host
  // pauses for a while does not hold the whole pass up: the figure is what
  // the pool delivered. Passes during which the host steals CPU time still
  // read low (bench prints the steal beside every repeat).
  constexpr int64_t kChunks = 64, kRounds = 20'000'000 / kChunks;
  std::vector<int32_t> sinks(n_threads * kChunks);
  std::vector<double> r;
  for (int p = 0; p < passes; ++p) {
    std::vector<uint64_t> macs(n_threads * kChunks);
    const double t0 = now_seconds();
    pool.parallel_for(n_threads * kChunks, 1, [&](int64_t b, int64_t e, int) {
      for (int64_t t = b; t < e; ++t) macs[t] = int8_peak(kRounds, &sinks[t]);
    });
    const double dt = now_seconds() - t0;
    r.push_back(static_cast<double>(std::accumulate(macs.begin(), macs.end(), uint64_t{0})) / dt);
  }
  std::sort(r.begin(), r.end());
  return r[r.size() / 2];
}

double prompt_macs_per_token(const ModelConfig& c, const ModelWeights& w) {
  double macs = 0;
  for (int l = 0; l < c.n_layer; ++l) {
    w.layers[l].for_each([&](const TensorView& v) {
      if (v.data && v.ne[1] > 1) macs += static_cast<double>(v.ne[0]) * v.ne[1] * v.ne[2];
    });
    const ExpertTensors& x = w.experts[l];
    if (x.gate_exps.data)
      macs += static_cast<double>(c.n_expert_used) *
              (static_cast<double>(x.gate_exps.ne[0]) * x.gate_exps.ne[1] +
               static_cast<double>(x.up_exps.ne[0]) * x.up_exps.ne[1] +
               static_cast<double>(x.down_exps.ne[0]) * x.down_exps.ne[1]);
  }
  return macs;
}

double probe_read_bandwidth(int n_threads, size_t bytes, int passes) {
  return probe_read(n_threads, bytes, passes).bytes_per_s;
}

}  // namespace colibri
