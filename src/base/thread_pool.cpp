#include "base/thread_pool.h"

#include <algorithm>
#include <chrono>

#include "base/error.h"

namespace colibri {

namespace {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// How long a worker spins on the next job before it sleeps.
constexpr auto kSpin = std::chrono::microseconds(200);

// Chunks per thread: enough that a late thread's share is spread over the
// others, few enough that claiming (one contended compare-exchange each)
// stays small next to a chunk's work. (16 measured no faster than 4 for
// decode on 2 threads, and prompts a little slower.)
constexpr int64_t kChunksPerThread = 4;

constexpr uint64_t kCountMask = 0xFFFFFFFFu;

}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads < 1 ? 1 : n_threads) {
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true);
  }
  start_cv_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::work(uint32_t job, int index) {
  uint64_t s = claim_.load(std::memory_order_acquire);
  for (;;) {
    if ((s >> 32) != job || (s & kCountMask) == 0) return;
    if (!claim_.compare_exchange_weak(s, s - 1, std::memory_order_acq_rel,
                                      std::memory_order_acquire))
      continue;
    // Chunks are handed out from the last; the job's fields are stable while
    // this chunk is unfinished.
    const int64_t c = static_cast<int64_t>(s & kCountMask) - 1;
    const int64_t blocks = (n_ + grain_ - 1) / grain_;
    const int64_t b = std::min(c * blocks / n_chunks_ * grain_, n_);
    const int64_t e = std::min((c + 1) * blocks / n_chunks_ * grain_, n_);
    if (b < e) thunk_(ctx_, b, e, index);
    done_.fetch_add(1, std::memory_order_release);
    s = claim_.load(std::memory_order_acquire);
  }
}

void ThreadPool::run(int64_t n, int64_t grain, Thunk thunk, void* ctx) {
  thunk_ = thunk;
  ctx_ = ctx;
  n_ = n;
  grain_ = grain < 1 ? 1 : grain;
  const int64_t blocks = (n_ + grain_ - 1) / grain_;
  n_chunks_ = std::min<int64_t>(blocks, n_threads_ * kChunksPerThread);
  CLB_ASSERT(n_chunks_ >= 1 && n_chunks_ <= static_cast<int64_t>(kCountMask));
  done_.store(0, std::memory_order_relaxed);
  const uint32_t job = ++job_;
  {
    // The lock pairs with the sleepers' predicate check, so none misses the job.
    std::lock_guard<std::mutex> lock(mu_);
    claim_.store((static_cast<uint64_t>(job) << 32) | static_cast<uint64_t>(n_chunks_),
                 std::memory_order_release);
  }
  if (sleeping_.load(std::memory_order_acquire) > 0) start_cv_.notify_all();
  work(job, 0);
  // Spin, but yield now and then: a worker holding the last chunk may have
  // been descheduled and needs the core.
  for (int spins = 1; done_.load(std::memory_order_acquire) != n_chunks_; ++spins) {
    cpu_relax();
    if (spins % 1024 == 0) std::this_thread::yield();
  }
}

void ThreadPool::worker(int index) {
  uint32_t seen = 0;
  auto published = [&] {
    return static_cast<uint32_t>(claim_.load(std::memory_order_acquire) >> 32);
  };
  for (;;) {
    auto start = std::chrono::steady_clock::now();
    int spins = 0;
    while (published() == seen && !stop_.load(std::memory_order_relaxed)) {
      cpu_relax();
      if (++spins % 1024 == 0 && std::chrono::steady_clock::now() - start > kSpin) {
        std::unique_lock<std::mutex> lock(mu_);
        sleeping_.fetch_add(1);
        start_cv_.wait(lock, [&] { return stop_.load() || published() != seen; });
        sleeping_.fetch_sub(1);
        break;
      }
    }
    if (stop_.load()) return;
    seen = published();
    work(seen, index);
  }
}

}  // namespace colibri
