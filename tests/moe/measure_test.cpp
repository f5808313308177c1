// Measurements behind the defaults in docs/STREAMING.md, not checks:
//   test_moe --gtest_also_run_disabled_tests --gtest_filter='*Measure*'
// Streams a synthetic model 3x the budget with each I/O engine, O_DIRECT
// setting and policy, and replays routing traces of the golden models
// through each policy at several cache sizes.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "base/sys.h"
#include "moe/cache_policy.h"
#include "moe/placement.h"
#include "run_util.h"
#include "synth_model.h"

namespace colibri {
namespace {

namespace fs = std::filesystem;

TEST(Measure, DISABLED_IoEnginesAndDirectIo) {
  const std::string path = (fs::temp_directory_path() / ("colibri_measure_" + std::to_string(::getpid()) + ".gguf")).string();
  test::SynthShape s;
  s.n_layer = 4;
  s.n_embd = 512;
  s.n_head = 8;
  s.n_head_kv = 4;
  s.head_dim = 64;
  s.n_expert = 32;
  s.n_expert_used = 4;
  s.n_ff_exp = 1024;
  s.n_vocab = 256;
  test::write_synth_qwen3moe(path, s, 9);
  for (const char* io : {"uring", "pread"})
    for (bool direct : {false, true})
      for (const char* policy : {"lru", "lfu-decay"}) {
        int fd = open(path.c_str(), O_RDONLY);
        posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        close(fd);
        test::LoadedModel m = test::load_model(path);
        ExpertStoreOptions o;
        o.mem_budget = 256ull << 20;
        o.io = io;
        o.o_direct = direct;
        o.policy = policy;
        o.no_history = true;
        auto store = make_expert_store(o, *m.file, m.cfg, m.w, 0);
        const double t0 = now_seconds();
        test::run_logits(m.cfg, m.w, *store, 8, 32, 2);
        const double dt = now_seconds() - t0;
        const ExpertStoreStats st = store->stats();
        std::printf("%-6s %-9s %-9s  %.2f s  hit %.1f%%  read %.0f MiB  %.2f GB/s busy  io wait %.2f s\n", io,
                    direct ? "O_DIRECT" : "buffered", policy, dt, 100.0 * st.hits / st.requests,
                    st.bytes_read / 1048576.0, st.bytes_read / 1e9 / std::max(st.read_busy_s, 1e-9),
                    st.io_wait_s);
      }
  fs::remove(path);
}

TEST(Measure, DISABLED_PoliciesOnGoldenRoutingTraces) {
  const fs::path golden = fs::path(COLIBRI_SHARED_DIR) / "golden";
  if (!fs::exists(golden)) GTEST_SKIP();
  for (const char* name : {"stories260K-moe-split.gguf", "qwen3moe-f32.gguf", "olmoe-f32.gguf",
                           "mixtral-f32.gguf", "qwen2moe-f32.gguf"}) {
    if (!fs::exists(golden / name)) continue;
    test::LoadedModel m = test::load_model((golden / name).string());
    // The acquire order of 200 decoded tokens.
    const int n = 200;
    ThreadPool pool(2);
    KVCache kv(m.cfg, n + 1, 1);
    MappedExpertStore mapped(m.w.experts);
    Transformer tf(m.cfg, m.w, mapped, pool, Precision::kNative, 1, n + 1);
    std::vector<int32_t> trace;
    std::vector<float> logits(m.cfg.n_vocab);
    int32_t tok = 1;
    RoutingTrace rt;
    for (int p = 0; p < n; ++p) {
      rt.resize(1, m.cfg.n_layer, m.cfg.n_expert_used);
      BatchToken b{tok, p, 0, true};
      tf.forward(std::span<const BatchToken>(&b, 1), kv, logits.data(), &rt);
      for (int l = 0; l < m.cfg.n_layer; ++l)
        for (int j = 0; j < m.cfg.n_expert_used; ++j)
          if (rt.experts(0, l)[j] >= 0) trace.push_back(l * m.cfg.n_expert + rt.experts(0, l)[j]);
      tok = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    }
    const int keys = m.cfg.n_layer * m.cfg.n_expert;
    const int per_token = static_cast<int>(trace.size() / n);
    for (double frac : {0.25, 0.5, 0.75}) {
      const int slots = std::max(1, static_cast<int>(frac * keys));
      std::printf("%-28s %3d of %3d slabs (token uses %2d): lru %.1f%%  lfu-decay %.1f%%\n", name, slots,
                  keys, per_token, 100.0 * simulate_cache("lru", slots, keys, trace) / trace.size(),
                  100.0 * simulate_cache("lfu-decay", slots, keys, trace) / trace.size());
    }
  }
}

}  // namespace
}  // namespace colibri
