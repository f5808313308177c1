#include "moe/io_engine.h"

#include <fcntl.h>
#include <liburing.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "base/error.h"
#include "base/sys.h"

namespace colibri {

namespace {

// Finishes the part of an op a short read left, synchronously; returns false
// and fills err when the file ends or fails first.
bool read_rest(ReadOp& op, char* err, size_t err_size) {
  while (op.done < op.expected) {
    ssize_t r = pread(op.fd, op.dst + op.done, op.length - op.done, op.offset + op.done);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      std::snprintf(err, err_size, "read of %zu bytes at offset %llu: %s", op.expected,
                    static_cast<unsigned long long>(op.offset),
                    r < 0 ? std::strerror(errno) : "the file ended early (truncated?)");
      return false;
    }
    op.done += static_cast<size_t>(r);
  }
  return true;
}

void finish(ReadOp& op) {
  if (op.drop_cache) drop_file_cache(op.fd, op.offset, op.length);
}

// Ops waiting to start, in two rings: urgent ones (a reader is blocked on
// them) start before the rest (guesses about later layers), each ring in
// submission order. Not thread-safe; the engines hold their lock.
class OpQueue {
 public:
  explicit OpQueue(int max_ops) : rings_{Ring(max_ops), Ring(max_ops)} {}
  void push(ReadOp* op, bool urgent) { rings_[urgent ? 0 : 1].push(op); }
  bool empty() const { return rings_[0].count == 0 && rings_[1].count == 0; }
  ReadOp* pop() { return rings_[rings_[0].count > 0 ? 0 : 1].pop(); }

 private:
  struct Ring {
    explicit Ring(int max_ops) : ops(static_cast<size_t>(max_ops) + 1) {}
    void push(ReadOp* op) {
      CLB_ASSERT(count < ops.size());
      ops[(head + count++) % ops.size()] = op;
    }
    ReadOp* pop() {
      ReadOp* op = ops[head];
      head = (head + 1) % ops.size();
      --count;
      return op;
    }
    std::vector<ReadOp*> ops;
    size_t head = 0, count = 0;
  };
  Ring rings_[2];
};

// Time with reads in flight, from transitions of the in-flight count.
class BusyClock {
 public:
  void start() {
    if (inflight_++ == 0) t0_ = now_seconds();
  }
  void stop() {
    if (--inflight_ == 0) busy_ += now_seconds() - t0_;
  }
  double busy() const { return busy_; }

 private:
  int inflight_ = 0;
  double t0_ = 0, busy_ = 0;
};

class PreadEngine : public IoEngine {
 public:
  PreadEngine(int threads, int max_ops, Completion done, Prepare prepare, void* ctx)
      : queue_(max_ops), done_(done), prepare_(prepare), ctx_(ctx) {
    for (int i = 0; i < threads; ++i) workers_.emplace_back([this] { work(); });
  }
  ~PreadEngine() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : workers_) t.join();
  }
  void submit(ReadOp* op, bool urgent) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push(op, urgent);
      clock_.start();
    }
    cv_.notify_one();
  }
  IoEngineStats stats() const override {
    std::lock_guard<std::mutex> lock(mu_);
    IoEngineStats s = stats_;
    s.busy_s = clock_.busy();
    return s;
  }
  const char* name() const override { return "pread"; }

 private:
  void work() {
    char err[256];
    for (;;) {
      ReadOp* op;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;
        op = queue_.pop();
      }
      op->done = 0;
      if (prepare_) prepare_(ctx_, *op);
      const bool ok = read_rest(*op, err, sizeof err);
      if (ok) finish(*op);
      {
        std::lock_guard<std::mutex> lock(mu_);
        stats_.bytes += op->done;
        ++stats_.reads;
        clock_.stop();
      }
      done_(ctx_, *op, ok ? nullptr : err);
    }
  }

  mutable std::mutex mu_;
  std::condition_variable cv_;
  OpQueue queue_;  // pending ops
  bool stop_ = false;
  std::vector<std::thread> workers_;
  Completion done_;
  Prepare prepare_;
  void* ctx_;
  IoEngineStats stats_;
  BusyClock clock_;
};

// The submitting threads fill the ring under mu_; one reaper thread waits for
// completions (liburing allows one submitter side and one completer side).
class UringEngine : public IoEngine {
 public:
  UringEngine(int depth, int max_ops, Completion done, Prepare prepare, void* ctx)
      : depth_(depth), queue_(max_ops), done_(done), prepare_(prepare), ctx_(ctx) {}
  // Returns 0 or -errno.
  int init() {
    int r = io_uring_queue_init(static_cast<unsigned>(depth_), &ring_, 0);
    if (r < 0) return r;
    ready_ = true;
    reaper_ = std::thread([this] { reap(); });
    return 0;
  }
  ~UringEngine() override {
    if (!ready_) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
      io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
      // The ring is never over-full: at most depth_ reads are in flight.
      CLB_ASSERT(sqe != nullptr || inflight_ >= depth_);
      if (sqe) {
        io_uring_prep_nop(sqe);
        io_uring_sqe_set_data(sqe, nullptr);
        io_uring_submit(&ring_);
      }
    }
    reaper_.join();
    io_uring_queue_exit(&ring_);
  }
  void submit(ReadOp* op, bool urgent) override {
    std::lock_guard<std::mutex> lock(mu_);
    op->done = 0;
    clock_.start();
    if (inflight_ < depth_) {
      start(op);
      io_uring_submit(&ring_);
    } else {
      queue_.push(op, urgent);
    }
  }
  IoEngineStats stats() const override {
    std::lock_guard<std::mutex> lock(mu_);
    IoEngineStats s = stats_;
    s.busy_s = clock_.busy();
    return s;
  }
  const char* name() const override { return "io_uring"; }

 private:
  // Under mu_, with inflight_ < depth_. The kernel takes the destination's
  // pages when the read is submitted, on this thread; prepare_ (rarely more
  // than a page fault's wait) comes first.
  void start(ReadOp* op) {
    if (prepare_ && op->done == 0) prepare_(ctx_, *op);
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    CLB_ASSERT(sqe != nullptr);
    io_uring_prep_read(sqe, op->fd, op->dst + op->done, static_cast<unsigned>(op->length - op->done),
                       op->offset + op->done);
    io_uring_sqe_set_data(sqe, op);
    ++inflight_;
  }

  void reap() {
    char err[256];
    for (;;) {
      io_uring_cqe* cqe = nullptr;
      int r = io_uring_wait_cqe(&ring_, &cqe);
      if (r == -EINTR) continue;
      CLB_ASSERT(r == 0);  // the ring is ours and valid: nothing else can fail here
      ReadOp* op = static_cast<ReadOp*>(io_uring_cqe_get_data(cqe));
      const int res = cqe->res;
      io_uring_cqe_seen(&ring_, cqe);
      if (!op) {
        std::lock_guard<std::mutex> lock(mu_);
        if (stop_) return;
        continue;
      }
      bool ok = true, again = false;
      if (res == -EINTR || res == -EAGAIN) {
        again = true;
      } else if (res < 0) {
        std::snprintf(err, sizeof err, "read of %zu bytes at offset %llu: %s", op->expected,
                      static_cast<unsigned long long>(op->offset), std::strerror(-res));
        ok = false;
      } else {
        op->done += static_cast<size_t>(res);
        // A short read: the rest synchronously (rare; a signal or the end of file).
        if (op->done < op->expected) ok = read_rest(*op, err, sizeof err);
      }
      std::lock_guard<std::mutex> lock(mu_);
      --inflight_;
      if (again) {
        start(op);
      } else {
        if (ok) finish(*op);
        stats_.bytes += op->done;
        ++stats_.reads;
        clock_.stop();
      }
      while (inflight_ < depth_ && !queue_.empty()) start(queue_.pop());
      io_uring_submit(&ring_);
      if (!again) {
        // The completion takes the owner's lock; release ours first.
        mu_.unlock();
        done_(ctx_, *op, ok ? nullptr : err);
        mu_.lock();
      }
    }
  }

  int depth_;
  io_uring ring_{};
  bool ready_ = false;
  mutable std::mutex mu_;
  OpQueue queue_;  // ops waiting for room in the ring
  int inflight_ = 0;
  bool stop_ = false;
  std::thread reaper_;
  Completion done_;
  Prepare prepare_;
  void* ctx_;
  IoEngineStats stats_;
  BusyClock clock_;
};

}  // namespace

std::unique_ptr<IoEngine> make_io_engine(const std::string& kind, int depth, int max_ops,
                                         IoEngine::Completion done, IoEngine::Prepare prepare,
                                         void* ctx, std::string* note) {
  CLB_CHECK(kind == "uring" || kind == "pread", "unknown I/O engine '%s' (choices: uring, pread)",
            kind.c_str());
  CLB_CHECK(depth >= 1 && depth <= 4096, "I/O depth %d must be between 1 and 4096", depth);
  if (kind == "uring") {
    auto u = std::make_unique<UringEngine>(depth, max_ops, done, prepare, ctx);
    int r = u->init();
    if (r == 0) return u;
    if (note) *note = strprintf("io_uring is unavailable (%s); using pread threads", std::strerror(-r));
  }
  // Threads past a few only add context switches on a pread path.
  return std::make_unique<PreadEngine>(std::min(depth, 16), max_ops, done, prepare, ctx);
}

}  // namespace colibri
