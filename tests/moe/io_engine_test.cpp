// The I/O engines on a small file: every read brings the file's bytes, the
// owner's prepare runs before each read, and a read someone waits on
// (urgent) starts before reads that were only guesses, whatever order they
// were submitted in.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstddef>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <vector>

#include "moe/io_engine.h"

namespace colibri {
namespace {

namespace fs = std::filesystem;

// Records completions in order; the first one blocks until released, so the
// reads submitted meanwhile all queue behind it.
struct Recorder {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<int> order;
  std::vector<std::string> errors;
  std::vector<int> prepared;       // tags, in the order prepare saw them
  std::vector<int> landed_before;  // tags whose bytes were already there at prepare
  bool first_entered = false, released = false;

  // Before each read: its destination must still be as submitted (zeros).
  static void prepare(void* ctx, ReadOp& op) {
    auto* r = static_cast<Recorder*>(ctx);
    std::lock_guard<std::mutex> lock(r->mu);
    r->prepared.push_back(op.tag);
    for (size_t i = 0; i < op.length; ++i)
      if (op.dst[i] != 0) {
        r->landed_before.push_back(op.tag);
        break;
      }
  }

  static void done(void* ctx, ReadOp& op, const char* error) {
    auto* r = static_cast<Recorder*>(ctx);
    std::unique_lock<std::mutex> lock(r->mu);
    if (error) r->errors.push_back(error);
    r->order.push_back(op.tag);
    if (r->order.size() == 1) {
      r->first_entered = true;
      r->cv.notify_all();
      r->cv.wait(lock, [&] { return r->released; });
    }
    r->cv.notify_all();
  }
};

class IoEngineTest : public testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    path_ = (fs::temp_directory_path() / ("colibri_io_" + std::to_string(getpid()))).string();
    data_.resize(kOps * kLen);
    for (size_t i = 0; i < data_.size(); ++i) data_[i] = static_cast<uint8_t>(i * 131 + i / 977);
    std::ofstream(path_, std::ios::binary).write(reinterpret_cast<const char*>(data_.data()),
                                                 static_cast<std::streamsize>(data_.size()));
    fd_ = open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(fd_, 0);
  }
  void TearDown() override {
    close(fd_);
    fs::remove(path_);
  }
  static constexpr int kOps = 6;
  static constexpr size_t kLen = 40000;
  std::string path_;
  std::vector<uint8_t> data_;
  int fd_ = -1;
};

TEST_P(IoEngineTest, UrgentReadsStartBeforeGuessesAndEveryReadIsExact) {
  Recorder rec;
  std::string note;
  // One read at a time: completions come in the order reads start.
  auto io = make_io_engine(GetParam(), 1, kOps, &Recorder::done, &Recorder::prepare, &rec, &note);
  std::vector<std::vector<uint8_t>> dst(kOps, std::vector<uint8_t>(kLen, 0));
  std::vector<ReadOp> ops(kOps);
  for (int i = 0; i < kOps; ++i) {
    ops[i].fd = fd_;
    ops[i].offset = static_cast<uint64_t>(i) * kLen;
    ops[i].length = ops[i].expected = kLen;
    ops[i].dst = dst[i].data();
    ops[i].tag = i;
  }
  io->submit(&ops[0], false);
  {
    std::unique_lock<std::mutex> lock(rec.mu);
    rec.cv.wait(lock, [&] { return rec.first_entered; });
  }
  // Guesses 1 and 2, then urgent 3, guess 4, urgent 5.
  io->submit(&ops[1], false);
  io->submit(&ops[2], false);
  io->submit(&ops[3], true);
  io->submit(&ops[4], false);
  io->submit(&ops[5], true);
  {
    std::unique_lock<std::mutex> lock(rec.mu);
    rec.released = true;
    rec.cv.notify_all();
    rec.cv.wait(lock, [&] { return rec.order.size() == static_cast<size_t>(kOps); });
  }
  EXPECT_TRUE(rec.errors.empty()) << rec.errors.front();
  // Urgent reads first, each kind in submission order. The pread thread is
  // inside read 0's completion while the rest queue; the ring has room again
  // by then (read 0 has left it), so guess 1 starts at once and the rest queue.
  const std::vector<int> want = std::string(io->name()) == "io_uring" ? std::vector<int>{0, 1, 3, 5, 2, 4}
                                                                      : std::vector<int>{0, 3, 5, 1, 2, 4};
  EXPECT_EQ(rec.order, want) << io->name() << " " << note;
  // The owner's prepare ran once for each read, before its bytes came.
  std::vector<int> prepared = rec.prepared;
  std::sort(prepared.begin(), prepared.end());
  EXPECT_EQ(prepared, (std::vector<int>{0, 1, 2, 3, 4, 5}));
  EXPECT_TRUE(rec.landed_before.empty());
  for (int i = 0; i < kOps; ++i)
    EXPECT_EQ(0, std::memcmp(dst[i].data(), data_.data() + i * kLen, kLen)) << "read " << i;
  EXPECT_EQ(io->stats().bytes, kOps * kLen);
}

// Where io_uring_setup is refused (kernels before 5.1, Android's and
// container runtimes' seccomp filters) the uring engine is pread threads
// that say why. The refusal is real: a child process installs a seccomp
// filter that fails io_uring_setup with EPERM, as Android's does, and reads
// through the engine.
TEST_P(IoEngineTest, RefusedIoUringFallsBackToPread) {
  if (std::string(GetParam()) != "uring") GTEST_SKIP() << "only the uring engine falls back";
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // Exit codes name the step that failed (gtest does not run in the child).
    sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    sock_fprog prog = {static_cast<unsigned short>(std::size(filter)), filter};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)
      _exit(77);  // no seccomp here (qemu-user): nothing to check
    Recorder rec;
    rec.released = true;
    std::string note;
    auto io = make_io_engine("uring", 4, kOps, &Recorder::done, nullptr, &rec, &note);
    if (std::string(io->name()) != "pread") _exit(2);
    if (note.find("io_uring is unavailable") == std::string::npos) _exit(3);
    std::vector<uint8_t> dst(kLen);
    ReadOp op;
    op.fd = fd_;
    op.offset = kLen;
    op.length = op.expected = kLen;
    op.dst = dst.data();
    io->submit(&op, true);
    {
      std::unique_lock<std::mutex> lock(rec.mu);
      rec.cv.wait(lock, [&] { return rec.order.size() == 1; });
    }
    _exit(rec.errors.empty() && std::memcmp(dst.data(), data_.data() + kLen, kLen) == 0 ? 0 : 4);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  if (WEXITSTATUS(status) == 77) GTEST_SKIP() << "seccomp filters are not available here";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "2: not pread, 3: no note saying why, 4: wrong bytes";
}

INSTANTIATE_TEST_SUITE_P(Engines, IoEngineTest, testing::Values("pread", "uring"));

}  // namespace
}  // namespace colibri

