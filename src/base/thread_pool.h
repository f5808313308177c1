// A fixed pool of worker threads for data-parallel loops.
//
// parallel_for splits [0, n) into chunks, large first and smaller towards the
// end, and returns when all are done. The job is passed by reference (no std::function, no
// allocation per call), so it is usable in the decode loop.
//
// Chunks are claimed from a shared counter rather than assigned: a thread that
// the OS has descheduled (a loaded machine, more threads than free cores)
// simply claims nothing, and the threads that run take its share. With fixed
// shares every one of a token's hundreds of loops would wait a scheduler time
// slice for the missing thread (measured: 0.1 tok/s instead of tens).
// A decoded token issues hundreds of short loops, so workers spin for a while
// before sleeping: waking a sleeping thread costs tens of microseconds, which
// would dominate a 1 MB matrix-vector product.
//
// Between two loops the caller often works alone (a norm, a softmax, the
// router's top-k) while memory sits idle. prefetch_next names bytes the next
// loop reads first; a worker waiting for that loop reads them into its cache,
// and the loop's first chunks go to the workers (the calling thread claims
// from the far end), so that loop starts on bytes already fetched.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace colibri {

// Every job of a stretch of work, timed from the calling thread (`colibri
// bench --profile`): when it was published and done, what the caller named
// it and how many bytes it said the job reads, and when each thread finished
// its last chunk (0: took none). The gap before a job is the calling thread
// working alone. Sized by the caller; jobs past the capacity are counted, not
// recorded, so tracing never allocates.
struct JobTrace {
  static constexpr int kMaxThreads = 8;
  struct Job {
    double begin = 0, end = 0;
    const char* what = nullptr;
    uint64_t bytes = 0;
    uint64_t macs = 0;  // multiply-accumulates, where the caller counted them
    double thread_end[kMaxThreads] = {};
  };
  std::vector<Job> jobs;  // resized by the caller: the capacity
  size_t n = 0;           // recorded
  size_t dropped = 0;     // past the capacity
};

class ThreadPool {
 public:
  // n_threads counts the calling thread: 1 means no workers.
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int n_threads() const { return n_threads_; }

  // [p, p + bytes) is what the next parallel_for reads first (its first
  // rows): a worker that waits for it meanwhile reads up to kPrefetchBytes
  // of it into its cache. A hint, dropped if no worker is idle before then;
  // a later call replaces it. Any address will do: a prefetch never faults.
  void prefetch_next(const void* p, size_t bytes);
  static constexpr size_t kPrefetchBytes = 256u << 10;

  // Records every job from now on into *t (null: stop). The next job's name,
  // the bytes it reads and its multiply-accumulates, for its record; all
  // reset after each job.
  void set_trace(JobTrace* t) { trace_ = t; }
  JobTrace* trace() const { return trace_; }
  void name_next(const char* what) { next_what_ = what; }
  void note_next_bytes(uint64_t bytes) { next_bytes_ = bytes; }
  void note_next_macs(uint64_t macs) { next_macs_ = macs; }

  // fn(begin, end, thread_index) for chunks of [0, n); one thread may run
  // several chunks, one after the other. Chunks are multiples of `grain`
  // (except the last) so callers can keep blocks together. thread_index is in
  // [0, n_threads) and no two threads share one, so it can pick scratch space.
  template <typename Fn>
  void parallel_for(int64_t n, int64_t grain, Fn&& fn) {
    if (n <= 0) return;
    if (n_threads_ == 1 || n <= grain) {
      if (trace_) {
        const double t0 = trace_begin();
        fn(int64_t{0}, n, 0);
        trace_end(t0, true);
      } else {
        fn(int64_t{0}, n, 0);
      }
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
  // The clock at a job's start, and its record at the end (`alone`: the
  // calling thread ran all of it).
  double trace_begin();
  void trace_end(double begin, bool alone);
  void worker(int index);
  // Claims and runs chunks of job `job` until none is left.
  void work(uint32_t job, int index);

  int n_threads_;
  std::vector<std::thread> workers_;
  // Reads the pending prefetch hint if it is not `done_seq` (which it then
  // becomes), until the job after `seen` is published.
  void prefetch_hint(uint32_t seen, uint64_t& done_seq);

  // (job << 48) | (front << 24) | back: blocks [front, back) of grain_ are
  // not yet claimed; workers take chunks from the front, the calling thread
  // from the back. A claim is a compare-exchange that also checks the job
  // (its low 16 bits; a thread can lag at most one job), so a thread arriving
  // late never takes a chunk of a later job by mistake, and the job's fields
  // below cannot change under a thread that holds a claimed chunk (the job is
  // not done until it finishes).
  alignas(64) std::atomic<uint64_t> claim_{0};
  // The hint of prefetch_next: its sequence number (odd while being written)
  // and range.
  alignas(64) std::atomic<uint64_t> hint_seq_{0};
  std::atomic<const char*> hint_p_{nullptr};
  std::atomic<size_t> hint_bytes_{0};
  alignas(64) std::atomic<int64_t> done_{0};  // blocks finished in this job
  alignas(64) std::atomic<bool> stop_{false};
  std::atomic<int> sleeping_{0};
  std::mutex mu_;
  std::condition_variable start_cv_;
  uint32_t job_ = 0;  // the caller's count of jobs (low 16 bits published)
  // The current job, written before claim_ publishes it.
  Thunk thunk_ = nullptr;
  void* ctx_ = nullptr;
  int64_t n_ = 0;
  int64_t grain_ = 1;
  int64_t n_blocks_ = 0;
  // Tracing: the caller's record and names, each thread's end of the
  // current job (written before its last done_ increment, so the caller
  // reads it after the job).
  JobTrace* trace_ = nullptr;
  const char* next_what_ = nullptr;
  uint64_t next_bytes_ = 0;
  uint64_t next_macs_ = 0;
  double thread_end_[JobTrace::kMaxThreads] = {};
};

}  // namespace colibri
