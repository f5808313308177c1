// Logits are bit-for-bit the same whatever the store, budget, policy,
// prefetch, O_DIRECT or I/O engine: checked on the golden models of
// ../shared/golden against the mapped store, prompts in one batch and then
// single tokens.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <random>

#include "../gguf_split.h"
#include "../process_tmp_dir.h"
#include "moe/dense_arena.h"
#include "moe/placement.h"
#include "moe/streaming_store.h"
#include "run_util.h"

namespace colibri {
namespace {

namespace fs = std::filesystem;
const fs::path kGolden = fs::path(COLIBRI_SHARED_DIR) / "golden";

// Between the transformer and the store under test: before each acquire it
// asks for loads of other experts of this and the next MoE layer, and passes
// a guess to prefetch_predicted, so loads and evictions run beside the
// acquires the forward pass makes.
class NoisyPrefetcher : public ExpertStore {
 public:
  NoisyPrefetcher(ExpertStore& inner, const ModelWeights& w, int n_expert)
      : inner_(inner), w_(w), n_expert_(n_expert), rng_(11) {}
  ExpertWeights acquire(int layer, int expert) override {
    int ids[3];
    for (int& id : ids) id = static_cast<int>(rng_() % n_expert_);
    inner_.prefetch(layer, ids);
    for (int l = layer + 1; l < static_cast<int>(w_.experts.size()); ++l)
      if (w_.experts[l].gate_exps.data) {
        inner_.prefetch_predicted(l, std::span<const int>(ids, 2));
        break;
      }
    return inner_.acquire(layer, expert);
  }
  void release(int layer, int expert) override { inner_.release(layer, expert); }
  int max_held() const override { return inner_.max_held(); }
  bool ready(int layer, int expert) const override { return inner_.ready(layer, expert); }
  ExpertStoreStats stats() const override { return inner_.stats(); }
  const char* name() const override { return "noisy"; }
  void wait_dense(int stage) override { inner_.wait_dense(stage); }
  bool read_embedding_row(int64_t row, uint8_t* dst) override { return inner_.read_embedding_row(row, dst); }

 private:
  ExpertStore& inner_;
  const ModelWeights& w_;
  int n_expert_;
  std::mt19937 rng_;
};

std::vector<fs::path> moe_models() {
  std::vector<fs::path> out;
  if (!fs::exists(kGolden)) return out;
  for (const auto& e : fs::directory_iterator(kGolden))
    if (e.path().extension() == ".gguf") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

struct Variant {
  int slots_per_layer;  // 0: every expert fits; -1: a budget for two tokens' experts (embeddings left in the file)
  std::string policy, io;
  bool prefetch, o_direct, noisy;
  std::string str() const {
    return (slots_per_layer > 0   ? std::to_string(slots_per_layer) + " slots/layer"
            : slots_per_layer < 0 ? std::string("tight budget")
                                  : std::string("unlimited")) +
           " " + policy + " " + io + (prefetch ? " prefetch" : "") + (o_direct ? " O_DIRECT" : "") +
           (noisy ? " noisy" : "");
  }
};

// reference: the file whose mapped store gives the logits to match (a split
// model's unsplit file); by default the model itself.
void check_model(const fs::path& path, const std::vector<Variant>& variants,
                 const fs::path& reference = {}) {
  test::LoadedModel base = test::load_model(path.string());
  if (!base.cfg.is_moe()) return;
  const int n_prompt = 7, n_steps = 5;
  std::vector<float> want;
  {
    test::LoadedModel ref =
        test::load_model(reference.empty() ? path.string() : reference.string());
    MappedExpertStore mapped(ref.w.experts);
    want = test::run_logits(ref.cfg, ref.w, mapped, n_prompt, n_steps);
  }
  for (const Variant& v : variants) {
    SCOPED_TRACE(path.filename().string() + ": " + v.str());
    ModelWeights w = bind_weights(*base.file, base.cfg);
    ExpertStoreOptions o;
    o.slots_per_layer = std::max(v.slots_per_layer, 0);
    o.mem_budget = v.slots_per_layer > 0 ? 0 : (64ull << 30);
    if (v.slots_per_layer < 0)
      o.mem_budget = DenseArena::bytes_needed(*base.file, w, true) +
                     2 * StreamingExpertStore::slot_bytes(w.experts, v.o_direct) * base.cfg.n_expert_used;
    o.policy = v.policy;
    o.io = v.io;
    o.prefetch = v.prefetch;
    o.o_direct = v.o_direct;
    o.no_history = true;
    Plan plan;
    auto store = make_expert_store(o, *base.file, base.cfg, w, 0, &plan);
    // The forward pass starts while the dense weights may still load.
    NoisyPrefetcher noisy(*store, w, base.cfg.n_expert);
    ExpertStore& s = v.noisy ? static_cast<ExpertStore&>(noisy) : *store;
    const std::vector<float> got = test::run_logits(base.cfg, w, s, n_prompt, n_steps);
    // Nothing dense is read through the mapping any more.
    store->wait_dense(ExpertStore::kAllDense);
    if (plan.embeddings_in_file)
      EXPECT_EQ(w.token_embd.data, base.w.token_embd.data);  // rows come from the file
    else
      EXPECT_NE(w.token_embd.data, base.w.token_embd.data);
    if (v.slots_per_layer < 0) {
      EXPECT_EQ(plan.embeddings_in_file, DenseArena::embeddings_can_stay_in_file(base.w));
    }
    EXPECT_NE(w.layers[0].attn_norm.data, base.w.layers[0].attn_norm.data);
    ASSERT_EQ(got.size(), want.size());
    EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0)
        << "logits differ from the mapped store";
    const ExpertStoreStats st = store->stats();
    EXPECT_GT(st.requests, 0u);
    EXPECT_GT(st.bytes_read, 0u);
    if (v.slots_per_layer == 1 && !v.noisy) {
      EXPECT_LT(st.hits, st.requests);
    }
  }
}

TEST(Identical, EveryGoldenModelEveryBudgetAndPolicy) {
  auto models = moe_models();
  if (models.empty()) GTEST_SKIP() << "no golden models in " << kGolden;
  std::vector<Variant> vs;
  for (int slots : {1, 2, 8, 0, -1})
    for (const char* policy : {"lru", "lfu-decay"}) vs.push_back({slots, policy, "uring", false, false, false});
  int n = 0;
  for (const fs::path& p : models) {
    check_model(p, vs);
    ++n;
  }
  EXPECT_GT(n, 0);
}

// An expert whose gate and up differ in type (tests/data/golden's mixed file:
// Q4_K gate and Q8_0 up in layer 0, IQ4_XS and Q6_K in layer 1): the same
// logits from every budget as from the mapped store.
TEST(Identical, GateAndUpOfDifferentTypes) {
  std::vector<Variant> vs;
  for (int slots : {1, 2, 0, -1}) vs.push_back({slots, "lru", "uring", true, false, false});
  vs.push_back({1, "lfu-decay", "uring", true, true, true});
  check_model(fs::path(COLIBRI_SOURCE_DIR) / "tests/data/golden/qwen3moe-h256-mixed.gguf", vs);
}

TEST(Identical, IoEnginesDirectIoAndConcurrentPrefetch) {
  std::vector<fs::path> models;
  for (const char* name : {"qwen3moe-q4_0.gguf", "mixtral-q4_0.gguf", "olmoe-q8_0.gguf",
                           "qwen2moe-f32.gguf"})
    if (fs::exists(kGolden / name)) models.push_back(kGolden / name);
  if (models.empty()) GTEST_SKIP() << "no golden models in " << kGolden;
  std::vector<Variant> vs;
  // Every pair of settings appears, in 20 variants rather than 80.
  int i = 0;
  for (int slots : {1, 2, 8, 0, -1})
    for (const char* io : {"uring", "pread"})
      for (bool direct : {false, true}) {
        const bool noisy = (i++ % 3) != 1;
        vs.push_back({slots, (i % 2) ? "lru" : "lfu-decay", io, noisy, direct, noisy});
      }
  for (const fs::path& p : models) check_model(p, vs);
}

// A model split in three files as llama.cpp's gguf-split writes them gives
// the logits of the one file, its dense weights and experts read from the
// three under every kind of budget, buffered and O_DIRECT (embedding rows too,
// under the tight budget).
TEST(Identical, SplitModelGivesTheOneFilesLogits) {
  std::vector<fs::path> models;
  for (const char* name : {"qwen3moe-q4_0.gguf", "deepseek-v3-f32.gguf", "olmoe-q8_0.gguf"})
    if (fs::exists(kGolden / name)) models.push_back(kGolden / name);
  if (models.empty()) GTEST_SKIP() << "no golden models in " << kGolden;
  const ProcessTmpDir dir("colibri-split-identical-");
  const std::vector<Variant> vs = {
      {1, "lru", "uring", true, false, true},    {1, "lfu-decay", "pread", false, true, false},
      {2, "lru", "uring", true, true, true},     {-1, "lfu-decay", "uring", false, true, false},
      {-1, "lru", "pread", false, false, false}, {0, "lru", "uring", false, true, false}};
  for (const fs::path& p : models) {
    auto whole = GgufFile::open(p.string());
    const auto paths = test::write_split_gguf(*whole, (dir.path / p.stem()).string(), 3);
    auto split = GgufFile::open(paths[0]);
    ASSERT_EQ(split->parts().size(), 3u);
    check_model(paths[0], vs, p);
  }
}

// With several threads every product is split at 16-row boundaries, the
// chunks claimed as they come; with one thread each is one call over all its
// rows. The logits are the same bits, prompts and decode steps.
TEST(Identical, OneThreadOrSeveral) {
  auto models = moe_models();
  if (models.empty()) GTEST_SKIP() << "no golden models in " << kGolden;
  int n = 0;
  for (const fs::path& p : models) {
    test::LoadedModel m = test::load_model(p.string());
    if (!m.cfg.is_moe()) continue;
    SCOPED_TRACE(p.filename().string());
    MappedExpertStore mapped(m.w.experts);
    const std::vector<float> one = test::run_logits(m.cfg, m.w, mapped, 7, 5, 1);
    for (int threads : {2, 3}) {
      const std::vector<float> got = test::run_logits(m.cfg, m.w, mapped, 7, 5, threads);
      ASSERT_EQ(got.size(), one.size());
      EXPECT_EQ(std::memcmp(got.data(), one.data(), got.size() * sizeof(float)), 0)
          << threads << " threads against one";
    }
    ++n;
  }
  EXPECT_GT(n, 0);
}

}  // namespace
}  // namespace colibri
