// The budget, enforced by the kernel: a model 3x larger than its budget runs
// in a child process inside a cgroup v1 memory limit of budget + the plan's
// fixed overhead, and must finish with no OOM kill, peak usage under the
// limit, and the same logits as the mapped store outside it.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "base/error.h"
#include "base/sys.h"
#include "moe/placement.h"
#include "run_util.h"
#include "synth_model.h"

namespace colibri {
namespace {

namespace fs = std::filesystem;

std::string own_memory_cgroup() {
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  while (std::getline(in, line)) {
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a != std::string::npos && b != std::string::npos && line.substr(a + 1, b - a - 1) == "memory")
      return "/sys/fs/cgroup/memory" + line.substr(b + 1);
  }
  return "";
}

bool write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  out.flush();
  return static_cast<bool>(out);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

uint64_t read_u64(const std::string& path) { return std::strtoull(read_file(path).c_str(), nullptr, 10); }

constexpr int kPrompt = 16, kSteps = 24;

// AddressSanitizer keeps memory of its own in the process (shadow pages,
// freed blocks in quarantine, its allocator's metadata), which is not the
// engine's: a sanitized run is allowed that much more. The release run holds
// the plan's limit exactly.
#if defined(__SANITIZE_ADDRESS__)
constexpr uint64_t kSanitizerBytes = 64ull << 20;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr uint64_t kSanitizerBytes = 64ull << 20;
#else
constexpr uint64_t kSanitizerBytes = 0;
#endif
#else
constexpr uint64_t kSanitizerBytes = 0;
#endif

TEST(Budget, ModelThreeTimesTheBudgetRunsInACgroupLimit) {
  const std::string parent = own_memory_cgroup();
  if (parent.empty() || !fs::exists(parent + "/memory.limit_in_bytes"))
    GTEST_SKIP() << "no cgroup v1 memory controller for this process";
  const std::string cg = parent + "/colibri_budget_" + std::to_string(getpid());
  if (mkdir(cg.c_str(), 0755) != 0)
    GTEST_SKIP() << "cannot create a child memory cgroup under " << parent << ": " << std::strerror(errno);
  struct Cleanup {
    std::string cg, model, out;
    ~Cleanup() {
      rmdir(cg.c_str());
      std::remove(model.c_str());
      std::remove(out.c_str());
    }
  } cleanup{cg, (fs::temp_directory_path() / ("colibri_budget_" + std::to_string(getpid()) + ".gguf")).string(),
            (fs::temp_directory_path() / ("colibri_budget_" + std::to_string(getpid()) + ".out")).string()};

  test::SynthShape shape;
  shape.n_layer = 3;
  shape.n_embd = 256;
  shape.n_head = 4;
  shape.n_head_kv = 2;
  shape.head_dim = 64;
  shape.n_expert = 48;
  shape.n_expert_used = 4;
  shape.n_ff_exp = 512;
  shape.n_vocab = 256;
  test::write_synth_qwen3moe(cleanup.model, shape, 42);
  {
    // Out of the page cache, so the child's reads are charged to the child.
    int fd = open(cleanup.model.c_str(), O_RDONLY);
    ASSERT_GE(fd, 0);
    fdatasync(fd);
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
  }

  const uint64_t budget = 64ull << 20;
  ExpertStoreOptions o;
  o.mem_budget = budget;
  o.no_history = true;
  Plan plan;
  uint64_t other = 0;
  {
    test::LoadedModel m = test::load_model(cleanup.model);
    other = runtime_bytes_estimate(m.cfg, kPrompt + kSteps + 1, kPrompt, 1, 2, 2);  // F16 cache
    plan = make_plan(o, *m.file, m.cfg, m.w, other);
    ASSERT_GE(static_cast<double>(m.file->file_size()), 3.0 * budget) << "the model must be 3x the budget";
  }
  const uint64_t limit = budget + plan.fixed_overhead + kSanitizerBytes;
  ASSERT_TRUE(write_file(cg + "/memory.limit_in_bytes", std::to_string(limit)))
      << "cannot set the limit of " << cg;
  std::printf("budget %s, overhead %s, sanitizer %s, limit %s, model %s\n%s", format_size(budget).c_str(),
              format_size(plan.fixed_overhead).c_str(), format_size(kSanitizerBytes).c_str(),
              format_size(limit).c_str(),
              format_size(static_cast<double>(fs::file_size(cleanup.model))).c_str(),
              plan.describe().c_str());

  std::fflush(stdout);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (!write_file(cg + "/cgroup.procs", std::to_string(getpid()))) _exit(2);
    write_file("/proc/sys/vm/drop_caches", "1");  // where allowed; the fadvise above did the rest
    try {
      test::LoadedModel m = test::load_model(cleanup.model);
      auto store = make_expert_store(o, *m.file, m.cfg, m.w, other);
      std::vector<float> logits = test::run_logits(m.cfg, m.w, *store, kPrompt, kSteps);
      const ExpertStoreStats st = store->stats();
      FILE* f = std::fopen(cleanup.out.c_str(), "wb");
      const uint64_t head[3] = {peak_rss_bytes(), st.bytes_read, st.requests};
      std::fwrite(head, sizeof head, 1, f);
      std::fwrite(logits.data(), sizeof(float), logits.size(), f);
      std::fclose(f);
    } catch (const Error& e) {
      std::fprintf(stderr, "child: %s\n", e.what());
      _exit(3);
    }
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  const std::string oom = read_file(cg + "/memory.oom_control");
  const uint64_t max_usage = read_u64(cg + "/memory.max_usage_in_bytes");
  const uint64_t failcnt = read_u64(cg + "/memory.failcnt");
  std::printf("cgroup: max usage %s of %s, failcnt %llu\n%s", format_size(max_usage).c_str(),
              format_size(limit).c_str(), static_cast<unsigned long long>(failcnt), oom.c_str());
  ASSERT_TRUE(WIFEXITED(status)) << "the child was killed by signal "
                                 << (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  ASSERT_NE(WEXITSTATUS(status), 2) << "could not join " << cg;
  ASSERT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(oom.find("oom_kill 1"), std::string::npos) << oom;
  EXPECT_NE(oom.find("under_oom 0"), std::string::npos) << oom;
  EXPECT_LE(max_usage, limit);
  EXPECT_GT(max_usage, 0u);

  // The same logits as the mapped store, unconstrained.
  std::ifstream in(cleanup.out, std::ios::binary);
  uint64_t head[3];
  in.read(reinterpret_cast<char*>(head), sizeof head);
  std::printf("child: peak RSS %s, read %s for %llu expert requests\n", format_size(head[0]).c_str(),
              format_size(head[1]).c_str(), static_cast<unsigned long long>(head[2]));
  EXPECT_LE(head[0], limit);
  EXPECT_GT(head[1], 0u);
  test::LoadedModel m = test::load_model(cleanup.model);
  MappedExpertStore mapped(m.w.experts);
  std::vector<float> want = test::run_logits(m.cfg, m.w, mapped, kPrompt, kSteps);
  std::vector<float> got(want.size());
  in.read(reinterpret_cast<char*>(got.data()), static_cast<std::streamsize>(got.size() * sizeof(float)));
  ASSERT_TRUE(in) << "the child's logits are incomplete";
  EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0);
}

}  // namespace
}  // namespace colibri
