#include "base/thread_pool.h"

#include "base/error.h"

namespace colibri {

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads < 1 ? 1 : n_threads) {
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  start_cv_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::chunk(int index, int64_t* b, int64_t* e) const {
  int64_t blocks = (n_ + grain_ - 1) / grain_;
  int64_t per = blocks / n_threads_, extra = blocks % n_threads_;
  int64_t first = index * per + (index < extra ? index : extra);
  int64_t count = per + (index < extra ? 1 : 0);
  *b = first * grain_;
  *e = (first + count) * grain_;
  if (*e > n_) *e = n_;
  if (*b > n_) *b = n_;
}

void ThreadPool::run(int64_t n, int64_t grain, Thunk thunk, void* ctx) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    thunk_ = thunk;
    ctx_ = ctx;
    n_ = n;
    grain_ = grain < 1 ? 1 : grain;
    pending_ = n_threads_ - 1;
    ++generation_;
  }
  start_cv_.notify_all();
  int64_t b, e;
  chunk(0, &b, &e);
  if (b < e) thunk(ctx, b, e, 0);
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [this] { return pending_ == 0; });
}

void ThreadPool::worker(int index) {
  uint64_t seen = 0;
  for (;;) {
    std::unique_lock<std::mutex> lock(mu_);
    start_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
    if (stop_) return;
    seen = generation_;
    lock.unlock();
    int64_t b, e;
    chunk(index, &b, &e);
    if (b < e) thunk_(ctx_, b, e, index);
    lock.lock();
    if (--pending_ == 0) done_cv_.notify_one();
  }
}

}  // namespace colibri
