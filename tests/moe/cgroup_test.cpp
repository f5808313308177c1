// The budget, enforced by the kernel: a model runs in a child process inside
// a cgroup v1 memory limit of budget + the plan's fixed overhead, and must
// finish with no OOM kill, peak usage under the limit, and the same logits
// as the mapped store outside it. Two cases: a model 3x larger than its
// budget, and a context filled to its end while the KV cache takes its room
// from the expert cache.
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
#include "base/thread_pool.h"
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

// A child memory cgroup of our own, removed (with the files named) at the end.
struct Cgroup {
  std::string path, model, out;
  Cgroup(const std::string& parent, const std::string& name) {
    const std::string tag = name + "_" + std::to_string(getpid());
    path = parent + "/" + tag;
    model = (fs::temp_directory_path() / (tag + ".gguf")).string();
    out = (fs::temp_directory_path() / (tag + ".out")).string();
  }
  ~Cgroup() {
    rmdir(path.c_str());
    std::remove(model.c_str());
    std::remove(out.c_str());
  }
};

// Out of the page cache, so the child's reads are charged to the child.
void drop_from_page_cache(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY);
  if (fd < 0) return;
  fdatasync(fd);
  posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  close(fd);
}

// Runs body() in a child inside cg under `limit` bytes, cold; the child
// writes what it reports to cg.out. Checks that it ended well and within
// the limit.
template <typename Body>
void run_in_cgroup(const Cgroup& cg, uint64_t limit, Body body, uint64_t* max_usage_out = nullptr) {
  ASSERT_TRUE(write_file(cg.path + "/memory.limit_in_bytes", std::to_string(limit)))
      << "cannot set the limit of " << cg.path;
  std::fflush(stdout);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (!write_file(cg.path + "/cgroup.procs", std::to_string(getpid()))) _exit(2);
    write_file("/proc/sys/vm/drop_caches", "1");  // where allowed; the fadvise did the rest
    try {
      body();
    } catch (const Error& e) {
      std::fprintf(stderr, "child: %s\n", e.what());
      _exit(3);
    }
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  const std::string oom = read_file(cg.path + "/memory.oom_control");
  const uint64_t max_usage = read_u64(cg.path + "/memory.max_usage_in_bytes");
  const uint64_t failcnt = read_u64(cg.path + "/memory.failcnt");
  std::printf("cgroup: max usage %s of %s, failcnt %llu\n%s", format_size(max_usage).c_str(),
              format_size(limit).c_str(), static_cast<unsigned long long>(failcnt), oom.c_str());
  ASSERT_TRUE(WIFEXITED(status)) << "the child was killed by signal "
                                 << (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  ASSERT_NE(WEXITSTATUS(status), 2) << "could not join " << cg.path;
  ASSERT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(oom.find("oom_kill 1"), std::string::npos) << oom;
  EXPECT_NE(oom.find("under_oom 0"), std::string::npos) << oom;
  EXPECT_LE(max_usage, limit);
  EXPECT_GT(max_usage, 0u);
  if (max_usage_out) *max_usage_out = max_usage;
}

#define NEED_CGROUP(parent)                                                                 \
  const std::string parent = own_memory_cgroup();                                           \
  if (parent.empty() || !fs::exists(parent + "/memory.limit_in_bytes"))                     \
    GTEST_SKIP() << "no cgroup v1 memory controller for this process";

bool make_cgroup(const Cgroup& cg) { return mkdir(cg.path.c_str(), 0755) == 0; }

TEST(Budget, ModelThreeTimesTheBudgetRunsInACgroupLimit) {
  NEED_CGROUP(parent);
  Cgroup cg(parent, "colibri_budget");
  if (!make_cgroup(cg))
    GTEST_SKIP() << "cannot create a child memory cgroup under " << parent << ": " << std::strerror(errno);

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
  test::write_synth_qwen3moe(cg.model, shape, 42);
  drop_from_page_cache(cg.model);

  const uint64_t budget = 64ull << 20;
  ExpertStoreOptions o;
  o.mem_budget = budget;
  o.no_history = true;
  Plan plan;
  uint64_t other = 0;
  {
    test::LoadedModel m = test::load_model(cg.model);
    other = runtime_bytes_estimate(m.cfg, kPrompt + kSteps + 1, kPrompt, 1, 2, DType::F16);
    plan = make_plan(o, *m.file, m.cfg, m.w, other);
    ASSERT_GE(static_cast<double>(m.file->file_size()), 3.0 * budget) << "the model must be 3x the budget";
  }
  const uint64_t limit = budget + plan.fixed_overhead + kSanitizerBytes;
  std::printf("budget %s, overhead %s, sanitizer %s, limit %s, model %s\n%s", format_size(budget).c_str(),
              format_size(plan.fixed_overhead).c_str(), format_size(kSanitizerBytes).c_str(),
              format_size(limit).c_str(),
              format_size(static_cast<double>(fs::file_size(cg.model))).c_str(),
              plan.describe().c_str());

  run_in_cgroup(cg, limit, [&] {
    test::LoadedModel m = test::load_model(cg.model);
    auto store = make_expert_store(o, *m.file, m.cfg, m.w, other);
    std::vector<float> logits = test::run_logits(m.cfg, m.w, *store, kPrompt, kSteps);
    const ExpertStoreStats st = store->stats();
    FILE* f = std::fopen(cg.out.c_str(), "wb");
    const uint64_t head[3] = {peak_rss_bytes(), st.bytes_read, st.requests};
    std::fwrite(head, sizeof head, 1, f);
    std::fwrite(logits.data(), sizeof(float), logits.size(), f);
    std::fclose(f);
  });
  if (HasFatalFailure()) return;

  // The same logits as the mapped store, unconstrained.
  std::ifstream in(cg.out, std::ios::binary);
  uint64_t head[3];
  in.read(reinterpret_cast<char*>(head), sizeof head);
  std::printf("child: peak RSS %s, read %s for %llu expert requests\n", format_size(head[0]).c_str(),
              format_size(head[1]).c_str(), static_cast<unsigned long long>(head[2]));
  EXPECT_LE(head[0], limit);
  EXPECT_GT(head[1], 0u);
  test::LoadedModel m = test::load_model(cg.model);
  MappedExpertStore mapped(m.w.experts);
  std::vector<float> want = test::run_logits(m.cfg, m.w, mapped, kPrompt, kSteps);
  std::vector<float> got(want.size());
  in.read(reinterpret_cast<char*>(got.data()), static_cast<std::streamsize>(got.size() * sizeof(float)));
  ASSERT_TRUE(in) << "the child's logits are incomplete";
  EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0);
}

// A context filled to its last position in batches, then decoded to the
// end: the logits of each batch's last token and of each decoded token.
// With `grow`, the KV cache reports its growth to the store as the engine
// wires it (Engine: KVCache::set_growth_listener -> set_kv_bytes).
constexpr int kCtx = 4096, kCtxBatch = 256, kCtxDecode = 8;
std::vector<float> fill_context(const test::LoadedModel& m, ExpertStore& store, bool grow) {
  ThreadPool pool(2);
  KVCache kv(m.cfg, kCtx, 1);
  if (grow) kv.set_growth_listener([&](uint64_t bytes) { store.set_kv_bytes(bytes); });
  Transformer tf(m.cfg, m.w, store, pool, Precision::kNative, kCtxBatch, kCtx);
  const int n_vocab = m.cfg.n_vocab;
  std::vector<float> logits(static_cast<size_t>(kCtxBatch) * n_vocab), out;
  std::vector<BatchToken> batch(kCtxBatch);
  int pos = 0;
  for (; pos + kCtxBatch <= kCtx - kCtxDecode; pos += kCtxBatch) {
    for (int i = 0; i < kCtxBatch; ++i)
      batch[i] = {((pos + i) * 7 + 3) % n_vocab, pos + i, 0, i == kCtxBatch - 1};
    tf.forward(batch, kv, logits.data());
    out.insert(out.end(), logits.begin(), logits.begin() + n_vocab);
  }
  for (; pos < kCtx; ++pos) {
    BatchToken b{(pos * 13 + 5) % n_vocab, pos, 0, true};
    tf.forward(std::span<const BatchToken>(&b, 1), kv, logits.data());
    out.insert(out.end(), logits.begin(), logits.begin() + n_vocab);
  }
  return out;
}

TEST(Budget, KvCacheTakesItsRoomFromTheExpertCacheAsTheContextFills) {
  NEED_CGROUP(parent);
  Cgroup cg(parent, "colibri_kv_room");
  if (!make_cgroup(cg))
    GTEST_SKIP() << "cannot create a child memory cgroup under " << parent << ": " << std::strerror(errno);

  // 12 KiB of F16 KV per token: 48 MiB at the full 4096, 64 slabs of 768
  // KiB; large against the few MiB a run's usage varies by (pages in
  // flight through the page cache, the pool's 2 MiB pages).
  test::SynthShape shape;
  shape.n_layer = 3;
  shape.n_embd = 256;
  shape.n_head = 16;
  shape.n_head_kv = 16;
  shape.head_dim = 64;
  shape.n_expert = 64;
  shape.n_expert_used = 4;
  shape.n_ff_exp = 256;
  shape.n_vocab = 256;
  test::write_synth_qwen3moe(cg.model, shape, 7);
  drop_from_page_cache(cg.model);

  const uint64_t budget = 96ull << 20;
  ExpertStoreOptions o;
  o.mem_budget = budget;
  o.no_history = true;
  Plan plan;
  uint64_t scratch = 0, kv = 0;
  {
    test::LoadedModel m = test::load_model(cg.model);
    scratch = scratch_bytes_estimate(m.cfg, kCtx, kCtxBatch, 2);
    kv = kv_cache_bytes(m.cfg, kCtx, 1, DType::F16);
    plan = make_plan(o, *m.file, m.cfg, m.w, scratch, kv);
  }
  const uint64_t limit = budget + plan.fixed_overhead + kSanitizerBytes;
  std::printf("budget %s, limit %s\n%s", format_size(budget).c_str(), format_size(limit).c_str(),
              plan.describe().c_str());
  // The room is shared: the empty-context cache plus a full KV cache would
  // not fit, and the experts do not all fit at either end.
  ASSERT_GT(plan.n_slots, plan.n_slots_full);
  ASSERT_GT(plan.used_bytes() + kv, budget);
  ASSERT_LE(plan.used_bytes_full(), budget);
  ASSERT_FALSE(plan.all_experts_fit);

  uint64_t max_usage = 0;
  run_in_cgroup(cg, limit, [&] {
    test::LoadedModel m = test::load_model(cg.model);
    auto store = make_expert_store(o, *m.file, m.cfg, m.w, scratch, nullptr, kv);
    std::vector<float> logits = fill_context(m, *store, true);
    const ExpertStoreStats st = store->stats();
    FILE* f = std::fopen(cg.out.c_str(), "wb");
    const uint64_t head[4] = {peak_rss_bytes(), static_cast<uint64_t>(st.cache_slots_start),
                              static_cast<uint64_t>(st.cache_slots), st.slots_given_back};
    std::fwrite(head, sizeof head, 1, f);
    std::fwrite(logits.data(), sizeof(float), logits.size(), f);
    std::fclose(f);
  }, &max_usage);
  if (HasFatalFailure()) return;
  // What the child allocated after joining (the cgroup charges nothing from
  // before) stays near the budget: the plan's fixed overhead is mostly the
  // process itself, which the fork brought in uncharged. Holding the slots
  // of an empty context with the KV cache full would take 48 MiB more.
  EXPECT_LE(max_usage, budget + kSanitizerBytes + (12ull << 20));

  std::ifstream in(cg.out, std::ios::binary);
  uint64_t head[4];
  in.read(reinterpret_cast<char*>(head), sizeof head);
  std::printf("child: peak RSS %s, cache slots %llu at the start, %llu at the end (%llu given back)\n",
              format_size(head[0]).c_str(), static_cast<unsigned long long>(head[1]),
              static_cast<unsigned long long>(head[2]), static_cast<unsigned long long>(head[3]));
  // Peak RSS also counts the pages the fork brought in; under
  // AddressSanitizer those include its shadow of the parent's heap (the
  // cgroup's own count above is the strict one).
  EXPECT_LE(head[0], limit + kSanitizerBytes);
  EXPECT_EQ(head[1], static_cast<uint64_t>(plan.n_slots));
  EXPECT_LT(head[2], head[1]);
  EXPECT_EQ(head[3], head[1] - head[2]);

  // Bit for bit what the mapped store gives with no budget at all.
  test::LoadedModel m = test::load_model(cg.model);
  MappedExpertStore mapped(m.w.experts);
  std::vector<float> want = fill_context(m, mapped, false);
  std::vector<float> got(want.size());
  in.read(reinterpret_cast<char*>(got.data()), static_cast<std::streamsize>(got.size() * sizeof(float)));
  ASSERT_TRUE(in) << "the child's logits are incomplete";
  EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0);
}

}  // namespace
}  // namespace colibri
