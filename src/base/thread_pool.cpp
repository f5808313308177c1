#include "base/thread_pool.h"

#include <algorithm>
#include <chrono>

#include "base/error.h"
#include "base/sys.h"

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

// Guided self-scheduling: a claim takes 1/(kShare * n_threads) of the blocks
// still unclaimed, so chunks start large (few claims) and shrink towards the
// end, where a thread that finds nothing left waits at most one small chunk
// for the others. (Against 4 equal chunks per thread: OLMoE Q4_0 decode on 2
// threads +1%, prompts the same, both within this machine's noise.)
constexpr int64_t kShare = 2;

// Fields of claim_: a job number and two block indices.
constexpr uint64_t kJobMask = 0xFFFFu;
constexpr uint64_t kFieldMask = 0xFFFFFFu;

// Bytes of a prefetch hint read between two looks at whether the job came.
constexpr size_t kPrefetchStep = 4096;

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
    // The claim is decided from s alone: the job's fields may already belong
    // to the next job when this one has nothing left.
    const int64_t front = static_cast<int64_t>((s >> 24) & kFieldMask);
    const int64_t back = static_cast<int64_t>(s & kFieldMask);
    const int64_t left = back - front;
    if ((s >> 48) != (job & kJobMask) || left <= 0) return;
    const int64_t take = std::max<int64_t>(1, left / (kShare * n_threads_));
    // Workers from the front (where a waiting worker prefetched), the
    // calling thread from the back.
    const int64_t b0 = index == 0 ? back - take : front;
    const uint64_t next = index == 0 ? s - static_cast<uint64_t>(take)
                                     : s + (static_cast<uint64_t>(take) << 24);
    if (!claim_.compare_exchange_weak(s, next, std::memory_order_acq_rel, std::memory_order_acquire)) continue;
    // The job's fields are stable while this chunk is unfinished.
    const int64_t b = b0 * grain_, e = std::min((b0 + take) * grain_, n_);
    thunk_(ctx_, b, e, index);
    if (trace_ && index < JobTrace::kMaxThreads) thread_end_[index] = now_seconds();
    done_.fetch_add(take, std::memory_order_release);
    s = claim_.load(std::memory_order_acquire);
  }
}

double ThreadPool::trace_begin() {
  std::fill(std::begin(thread_end_), std::end(thread_end_), 0.0);
  return now_seconds();
}

void ThreadPool::trace_end(double begin, bool alone) {
  const double end = now_seconds();
  JobTrace& t = *trace_;
  if (t.n < t.jobs.size()) {
    JobTrace::Job& j = t.jobs[t.n++];
    j.begin = begin;
    j.end = end;
    j.what = next_what_;
    j.bytes = next_bytes_;
    j.macs = next_macs_;
    for (int i = 0; i < JobTrace::kMaxThreads; ++i) j.thread_end[i] = thread_end_[i];
    if (alone) j.thread_end[0] = end;
  } else {
    ++t.dropped;
  }
  next_what_ = nullptr;
  next_bytes_ = 0;
  next_macs_ = 0;
}

void ThreadPool::run(int64_t n, int64_t grain, Thunk thunk, void* ctx) {
  const double traced = trace_ ? trace_begin() : 0;
  thunk_ = thunk;
  ctx_ = ctx;
  n_ = n;
  grain_ = grain < 1 ? 1 : grain;
  // Chunks stay multiples of the caller's grain when it doubles.
  while ((n_ + grain_ - 1) / grain_ > static_cast<int64_t>(kFieldMask)) grain_ *= 2;
  n_blocks_ = (n_ + grain_ - 1) / grain_;
  done_.store(0, std::memory_order_relaxed);
  const uint32_t job = ++job_;
  {
    // The lock pairs with the sleepers' predicate check, so none misses the job.
    std::lock_guard<std::mutex> lock(mu_);
    claim_.store((static_cast<uint64_t>(job & kJobMask) << 48) | static_cast<uint64_t>(n_blocks_),
                 std::memory_order_release);
  }
  if (sleeping_.load(std::memory_order_acquire) > 0) start_cv_.notify_all();
  work(job, 0);
  // Spin, but yield now and then: a worker holding the last chunk may have
  // been descheduled and needs the core.
  for (int spins = 1; done_.load(std::memory_order_acquire) != n_blocks_; ++spins) {
    cpu_relax();
    if (spins % 1024 == 0) std::this_thread::yield();
  }
  if (trace_) trace_end(traced, false);
}

void ThreadPool::prefetch_next(const void* p, size_t bytes) {
  if (n_threads_ == 1 || p == nullptr || bytes == 0) return;
  // A seqlock with one writer (the calling thread): odd while written.
  const uint64_t seq = hint_seq_.load(std::memory_order_relaxed);
  hint_seq_.store(seq + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  hint_p_.store(static_cast<const char*>(p), std::memory_order_relaxed);
  hint_bytes_.store(std::min(bytes, kPrefetchBytes), std::memory_order_relaxed);
  hint_seq_.store(seq + 2, std::memory_order_release);
}

void ThreadPool::prefetch_hint(uint32_t seen, uint64_t& done_seq) {
  const uint64_t seq = hint_seq_.load(std::memory_order_acquire);
  if (seq == done_seq || (seq & 1)) return;
  const char* p = hint_p_.load(std::memory_order_relaxed);
  const size_t bytes = hint_bytes_.load(std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_acquire);
  if (hint_seq_.load(std::memory_order_relaxed) != seq) return;  // rewritten meanwhile
  done_seq = seq;
  const auto seen_job = static_cast<uint32_t>(seen & kJobMask);
  for (size_t at = 0; at < bytes; at += kPrefetchStep) {
    if (static_cast<uint32_t>(claim_.load(std::memory_order_acquire) >> 48) != seen_job) return;
    const size_t end = std::min(bytes, at + kPrefetchStep);
    for (size_t o = at; o < end; o += 64) __builtin_prefetch(p + o, 0, 2);
  }
}

void ThreadPool::worker(int index) {
  uint32_t seen = 0;
  uint64_t hint_done = 0;  // the last hint this worker read
  auto published = [&] {
    return static_cast<uint32_t>(claim_.load(std::memory_order_acquire) >> 48);
  };
  for (;;) {
    auto start = std::chrono::steady_clock::now();
    int spins = 0;
    while (published() == seen && !stop_.load(std::memory_order_relaxed)) {
      // One worker reads a hint for the next job while it waits for it.
      if (index == 1 && hint_seq_.load(std::memory_order_relaxed) != hint_done) prefetch_hint(seen, hint_done);
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
