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

void ThreadPool::chunk(int index, int64_t* b, int64_t* e) const {
  int64_t blocks = (n_ + grain_ - 1) / grain_;
  int64_t per = blocks / n_threads_, extra = blocks % n_threads_;
  int64_t first = index * per + (index < extra ? index : extra);
  int64_t count = per + (index < extra ? 1 : 0);
  *b = std::min(first * grain_, n_);
  *e = std::min((first + count) * grain_, n_);
}

void ThreadPool::run(int64_t n, int64_t grain, Thunk thunk, void* ctx) {
  thunk_ = thunk;
  ctx_ = ctx;
  n_ = n;
  grain_ = grain < 1 ? 1 : grain;
  pending_.store(n_threads_ - 1, std::memory_order_relaxed);
  {
    // The lock pairs with the sleepers' predicate check, so none misses the bump.
    std::lock_guard<std::mutex> lock(mu_);
    generation_.fetch_add(1, std::memory_order_release);
  }
  if (sleeping_.load(std::memory_order_acquire) > 0) start_cv_.notify_all();
  int64_t b, e;
  chunk(0, &b, &e);
  if (b < e) thunk(ctx, b, e, 0);
  // Spin, but yield now and then: a worker that was descheduled needs the core.
  for (int spins = 1; pending_.load(std::memory_order_acquire) != 0; ++spins) {
    cpu_relax();
    if (spins % 4096 == 0) std::this_thread::yield();
  }
}

void ThreadPool::worker(int index) {
  uint64_t seen = 0;
  for (;;) {
    auto start = std::chrono::steady_clock::now();
    int spins = 0;
    while (generation_.load(std::memory_order_acquire) == seen && !stop_.load()) {
      cpu_relax();
      if (++spins % 1024 == 0 && std::chrono::steady_clock::now() - start > kSpin) {
        std::unique_lock<std::mutex> lock(mu_);
        sleeping_.fetch_add(1);
        start_cv_.wait(lock, [&] {
          return stop_.load() || generation_.load(std::memory_order_acquire) != seen;
        });
        sleeping_.fetch_sub(1);
        break;
      }
    }
    if (stop_.load()) return;
    seen = generation_.load(std::memory_order_acquire);
    int64_t b, e;
    chunk(index, &b, &e);
    if (b < e) thunk_(ctx_, b, e, index);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

}  // namespace colibri
