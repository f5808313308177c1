// ThreadPool::parallel_for: every index runs exactly once, in chunks that are
// whole multiples of the grain, on thread indices that are in range and never
// run two chunks at once; many short jobs in a row (the decode pattern) and
// more threads than cores (chunks claimed by whoever runs) stay correct, and
// so do jobs of changing sizes while the threads are preempted, job numbers
// past the claim word's 16 bits, prefetch hints and jobs of more blocks than
// its 24-bit indices hold.
#include "base/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <thread>
#include <vector>

namespace colibri {
namespace {

void check_job(ThreadPool& pool, int64_t n, int64_t grain) {
  std::vector<std::atomic<int>> hits(n);
  std::vector<std::atomic<int>> busy(pool.n_threads());
  std::atomic<int> bad_chunk{0}, bad_thread{0}, overlap{0};
  pool.parallel_for(n, grain, [&](int64_t b, int64_t e, int th) {
    if (th < 0 || th >= pool.n_threads()) {
      ++bad_thread;
      return;
    }
    if (busy[th].fetch_add(1) != 0) ++overlap;
    if (b < 0 || e > n || b >= e || b % grain != 0 || (e != n && e % grain != 0)) ++bad_chunk;
    for (int64_t i = b; i < e; ++i) hits[i].fetch_add(1, std::memory_order_relaxed);
    busy[th].fetch_sub(1);
  });
  ASSERT_EQ(bad_thread.load(), 0);
  ASSERT_EQ(bad_chunk.load(), 0) << "n " << n << " grain " << grain;
  ASSERT_EQ(overlap.load(), 0) << "one thread index ran two chunks at once";
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "index " << i << " of " << n;
}

TEST(ThreadPool, EveryIndexOnceInWholeGrains) {
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    for (int64_t n : {1, 2, 15, 16, 17, 100, 1024, 50304})
      for (int64_t grain : {1, 16, 64}) check_job(pool, n, grain);
  }
}

// Thousands of short jobs back to back, as a decoded token issues them: a
// worker that arrives late must never run a chunk of the wrong job.
TEST(ThreadPool, ManyShortJobsInARow) {
  ThreadPool pool(4);  // more threads than this machine may have free cores
  std::vector<int64_t> out(64);
  for (int job = 0; job < 20000; ++job) {
    pool.parallel_for(64, 1, [&](int64_t b, int64_t e, int) {
      for (int64_t i = b; i < e; ++i) out[i] = job;
    });
    for (int64_t i = 0; i < 64; ++i) ASSERT_EQ(out[i], job) << "job " << job << " index " << i;
  }
}

// Jobs of changing sizes back to back while another thread competes for the
// cores: a worker that read the state of a job just finished must not claim
// a chunk with the next job's sizes (a claim decided from the job's fields
// instead of the shared counter did, and counted blocks twice or hung).
TEST(ThreadPool, JobsOfChangingSizeUnderPreemption) {
  std::atomic<bool> stop{false};
  std::thread noise([&] {
    while (!stop.load()) {
      double x = 0;
      for (int i = 0; i < 20000; ++i) x = x + i;
      std::atomic_signal_fence(std::memory_order_seq_cst);
      if (x < 0) std::abort();
      std::this_thread::yield();
    }
  });
  for (int threads : {2, 3}) {
    ThreadPool pool(threads);
    uint32_t r = 12345;
    for (int job = 0; job < 50000; ++job) {
      r = r * 1664525u + 1013904223u;
      const int64_t n = 1 + (r >> 8) % 3000, grain = 1 + (r >> 20) % 48;
      std::atomic<int64_t> covered{0};
      pool.parallel_for(n, grain, [&](int64_t b, int64_t e, int) { covered.fetch_add(e - b); });
      ASSERT_EQ(covered.load(), n) << "job " << job << " with " << threads << " threads, grain " << grain;
    }
  }
  stop = true;
  noise.join();
}

// The claim word holds 16 bits of the job number and 24 of each block index:
// more jobs than 2^16 in a row must not confuse a late worker, prefetch hints
// (read by a waiting worker, some never read at all) must not change what
// runs, and a job of more than 2^24 blocks runs in coarser whole grains.
TEST(ThreadPool, JobNumbersWrapAndHintsChangeNothing) {
  ThreadPool pool(3);
  std::vector<char> bytes(1u << 20, 1);
  std::vector<int64_t> out(48);
  for (int job = 0; job < 70000; ++job) {
    if (job % 3 == 0) pool.prefetch_next(bytes.data() + (job % 64) * 4096, bytes.size() - (job % 64) * 4096);
    if (job % 7 == 0) pool.prefetch_next(nullptr, 0);
    pool.parallel_for(48, 1, [&](int64_t b, int64_t e, int) {
      for (int64_t i = b; i < e; ++i) out[i] = job;
    });
    for (int64_t i = 0; i < 48; ++i) ASSERT_EQ(out[i], job) << "job " << job << " index " << i;
  }
}

TEST(ThreadPool, MoreBlocksThanTheClaimWordHolds) {
  ThreadPool pool(2);
  check_job(pool, (int64_t{1} << 24) + 37, 3);
  check_job(pool, (int64_t{1} << 25) + 1, 1);
}

TEST(ThreadPool, SmallWorkStaysOnTheCaller) {
  ThreadPool pool(2);
  int calls = 0, thread = -1;
  pool.parallel_for(10, 16, [&](int64_t b, int64_t e, int th) {
    ++calls;
    thread = th;
    EXPECT_EQ(b, 0);
    EXPECT_EQ(e, 10);
  });
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(thread, 0);
}

}  // namespace
}  // namespace colibri
