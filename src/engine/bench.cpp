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
  CLB_CHECK(n_threads >= 1 && passes >= 1 && bytes >= (size_t{1} << 20),
            "bandwidth probe: needs a thread, a pass and at least 1 MiB (got %d, %d, %zu)", n_threads, passes,
            bytes);
  // Whole 4 KiB blocks per thread, so every stream's blocks are 256-byte multiples.
  constexpr size_t kBlock = 4096;
  const size_t blocks_per_thread = bytes / kBlock / static_cast<size_t>(n_threads);
  CLB_CHECK(blocks_per_thread >= kProbeStreams, "bandwidth probe: %zu bytes is too small for %d threads",
            bytes, n_threads);
  const size_t share = blocks_per_thread * kBlock, n = share * static_cast<size_t>(n_threads) / 8;
  AlignedBuffer<uint64_t> buf(n);
  ThreadPool pool(n_threads);
  pool.parallel_for(static_cast<int64_t>(n), 4096, [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) buf[i] = static_cast<uint64_t>(i);
  });
  std::vector<uint64_t> sums(n_threads);
  // One pass: each thread reads its share, front to back in one stream, or
  // as kProbeStreams sub-ranges a block of each in turn.
  auto pass = [&](int streams) {
    const double t0 = now_seconds();
    pool.parallel_for(n_threads, 1, [&](int64_t t0_, int64_t t1_, int) {
      for (int64_t t = t0_; t < t1_; ++t) {
        const uint8_t* base = reinterpret_cast<const uint8_t*>(buf.data()) + static_cast<size_t>(t) * share;
        uint64_t s = 0;
        if (streams == 1) {
          s = read_sum(base, share);
        } else {
          const size_t sub = share / kBlock / streams * kBlock;
          for (size_t at = 0; at < sub; at += kBlock)
            for (int k = 0; k < streams; ++k) s += read_sum(base + k * sub + at, kBlock);
          s += read_sum(base + streams * sub, share - streams * sub);  // the remainder
        }
        sums[t] += s;
      }
    });
    return static_cast<double>(share * n_threads) / (now_seconds() - t0);
  };
  auto median_of = [&](int streams) {
    std::vector<double> r;
    for (int i = 0; i < passes; ++i) r.push_back(pass(streams));
    std::sort(r.begin(), r.end());
    return r[r.size() / 2];
  };
  ReadProbe p;
  p.one_stream = median_of(1);
  p.streams = median_of(kProbeStreams);
  p.bytes_per_s = std::max(p.one_stream, p.streams);
  // Each pass adds sum(0..n-1) in total: using the sums keeps the reads from
  // being optimised away, and checks that every word was read.
  const uint64_t per_pass = static_cast<uint64_t>(n) * (n - 1) / 2;
  CLB_ASSERT(std::accumulate(sums.begin(), sums.end(), uint64_t{0}) ==
             per_pass * static_cast<uint64_t>(2 * passes));
  return p;
}

double probe_int8_peak(int n_threads, int passes) {
  CLB_CHECK(n_threads >= 1 && passes >= 1, "int8 peak: needs a thread and a pass");
  ThreadPool pool(n_threads);
  constexpr int64_t kRounds = 20'000'000;
  std::vector<int32_t> sinks(n_threads);
  std::vector<double> r;
  for (int p = 0; p < passes; ++p) {
    std::vector<uint64_t> macs(n_threads);
    const double t0 = now_seconds();
    pool.parallel_for(n_threads, 1, [&](int64_t b, int64_t e, int) {
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
