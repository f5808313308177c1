// The frontier families' golden files with one metadata number changed at
// random: the engine either loads the file and runs a forward pass, or
// stops with colibri::Error; it never crashes, hangs or reads out of bounds
// (the ASan/UBSan run of the suite checks the last).
#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "engine/engine.h"
#include "formats/gguf.h"
#include "formats/gguf_writer.h"

namespace colibri {
namespace {

namespace fs = std::filesystem;
const fs::path kGolden = fs::path(COLIBRI_SHARED_DIR) / "golden";

TEST(MutatedMetadata, ErrorOrAForwardPassNeverACrash) {
  const char* models[] = {"deepseek-v3-q8_0", "deepseek-v2-lite-f32", "deepseek-moe-f32", "gptoss-f32",
                          "glm4moe-q8_0"};
  if (!fs::exists(kGolden / "deepseek-v3-q8_0.gguf")) GTEST_SKIP() << "../shared/golden is absent";
  const uint64_t values[] = {0, 1, 2, 3, 5, 7, 8, 16, 31, 33, 64, 100, 4096, 1u << 20, 1ull << 31, 1ull << 40};
  std::mt19937 rng(2026);
  const fs::path out = fs::temp_directory_path() / "colibri-mutated.gguf";
  int loaded = 0, rejected = 0;
  for (const char* m : models) {
    auto f = GgufFile::open((kGolden / (std::string(m) + ".gguf")).string());
    const std::string arch(f->require_string("general.architecture"));
    std::vector<std::string> keys;
    for (const GgufKV& kv : f->metadata()) {
      if (kv.key.rfind(arch + ".", 0) != 0) continue;
      try {
        if (f->get_uint(kv.key)) keys.push_back(kv.key);  // the integer keys
      } catch (const Error&) {
      }
    }
    ASSERT_FALSE(keys.empty()) << m;
    for (int trial = 0; trial < 30; ++trial) {
      const std::string& key = keys[rng() % keys.size()];
      const uint64_t v = values[rng() % std::size(values)];
      SCOPED_TRACE(std::string(m) + ": " + key + " = " + std::to_string(v));
      GgufWriter w;
      for (const GgufKV& kv : f->metadata())
        if (kv.key != "general.alignment") w.set_value(kv.key, kv.value);
      w.set_u64(key, v);
      for (const GgufTensor& t : f->tensors()) {
        const uint8_t* d = f->tensor_data(t);
        w.add_tensor(t.name, t.type, std::vector<int64_t>(t.ne, t.ne + t.n_dims),
                     std::vector<uint8_t>(d, d + t.nbytes));
      }
      w.write(out.string());
      try {
        EngineOptions o;
        o.model_path = out.string();
        o.n_ctx = 64;
        o.n_batch = 8;
        o.n_threads = 1;
        o.store.no_history = true;
        o.store.mem_budget = 64ull << 20;
        Engine e(o);
        const std::vector<int32_t> prompt = {1, 2, 3, 4, 5};
        const float* logits = e.eval_prompt(prompt, 0, 0);
        ASSERT_NE(logits, nullptr);
        ++loaded;
      } catch (const Error&) {
        ++rejected;
      }
    }
  }
  fs::remove(out);
  std::printf("  %d mutated files ran, %d were rejected with an error\n", loaded, rejected);
  EXPECT_GT(rejected, 0);
  EXPECT_GT(loaded, 0);
}

}  // namespace
}  // namespace colibri
