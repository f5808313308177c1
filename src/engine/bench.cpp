#include "engine/bench.h"

#include <algorithm>
#include <numeric>
#include <vector>

#include "base/aligned_buffer.h"
#include "base/error.h"
#include "base/sys.h"
#include "base/thread_pool.h"

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

double probe_read_bandwidth(int n_threads, size_t bytes, int passes) {
  CLB_CHECK(n_threads >= 1 && passes >= 1 && bytes >= (size_t{1} << 20),
            "bandwidth probe: needs a thread, a pass and at least 1 MiB (got %d, %d, %zu)", n_threads, passes,
            bytes);
  const size_t n = bytes / sizeof(uint64_t);
  AlignedBuffer<uint64_t> buf(n);
  ThreadPool pool(n_threads);
  pool.parallel_for(static_cast<int64_t>(n), 4096, [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) buf[i] = static_cast<uint64_t>(i);
  });
  std::vector<uint64_t> sums(n_threads);
  double best = 0;
  for (int pass = 0; pass < passes; ++pass) {
    const double t0 = now_seconds();
    // One contiguous share per thread, read front to back with software
    // prefetches 4 KiB (into L1) and 16 KiB (into L2) ahead, as the matrix
    // kernels read weights: the probe is the fastest plain read this machine
    // gives, not a pessimistic one.
    const int64_t share = (static_cast<int64_t>(n) + n_threads - 1) / n_threads;
    pool.parallel_for(static_cast<int64_t>(n), (share + 7) / 8 * 8, [&](int64_t b, int64_t e, int t) {
      // Eight independent sums, so the loop waits on loads, not on one add chain.
      uint64_t s[8] = {};
      const uint64_t* p = buf.data();
      int64_t i = b;
      for (; i + 8 <= e; i += 8) {
        __builtin_prefetch(p + i + 512);
        __builtin_prefetch(p + i + 2048, 0, 2);
        for (int k = 0; k < 8; ++k) s[k] += p[i + k];
      }
      for (; i < e; ++i) s[0] += p[i];
      for (int k = 0; k < 8; ++k) sums[t] += s[k];
    });
    best = std::max(best, static_cast<double>(n * sizeof(uint64_t)) / (now_seconds() - t0));
  }
  // Each pass adds sum(0..n-1) in total: using the sums keeps the reads from
  // being optimised away, and checks that every element was read.
  const uint64_t per_pass = static_cast<uint64_t>(n) * (n - 1) / 2;
  CLB_ASSERT(std::accumulate(sums.begin(), sums.end(), uint64_t{0}) == per_pass * static_cast<uint64_t>(passes));
  return best;
}

}  // namespace colibri
