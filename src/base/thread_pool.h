// A fixed pool of worker threads for data-parallel loops.
//
// parallel_for splits [0, n) into contiguous chunks, one per thread, runs them
// and returns when all are done. The job is passed by reference (no
// std::function, no allocation per call), so it is usable in the decode loop.
// A decoded token issues hundreds of short parallel loops, so workers spin for
// a while before sleeping: waking a sleeping thread costs tens of
// microseconds, which would dominate a 1 MB matrix-vector product.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace colibri {

class ThreadPool {
 public:
  // n_threads counts the calling thread: 1 means no workers.
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int n_threads() const { return n_threads_; }

  // fn(begin, end, thread_index) for chunks of [0, n). Chunks are multiples of
  // `grain` (except the last) so callers can keep blocks together.
  template <typename Fn>
  void parallel_for(int64_t n, int64_t grain, Fn&& fn) {
    if (n <= 0) return;
    if (n_threads_ == 1 || n <= grain) {
      fn(int64_t{0}, n, 0);
      return;
    }
    run(n, grain, &invoke<std::remove_reference_t<Fn>>, &fn);
  }

 private:
  using Thunk = void (*)(void* ctx, int64_t begin, int64_t end, int thread);
  template <typename Fn>
  static void invoke(void* ctx, int64_t b, int64_t e, int t) {
    (*static_cast<Fn*>(ctx))(b, e, t);
  }
  void run(int64_t n, int64_t grain, Thunk thunk, void* ctx);
  void worker(int index);
  void chunk(int index, int64_t* b, int64_t* e) const;

  int n_threads_;
  std::vector<std::thread> workers_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
  std::atomic<int> sleeping_{0};
  std::mutex mu_;
  std::condition_variable start_cv_;
  // The current job, published before generation_ is bumped.
  Thunk thunk_ = nullptr;
  void* ctx_ = nullptr;
  int64_t n_ = 0;
  int64_t grain_ = 1;
};

}  // namespace colibri
