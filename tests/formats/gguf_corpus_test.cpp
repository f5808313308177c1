// Replays the fuzzer's corpus (tests/fuzz/corpus) through the function the
// fuzz target runs, in every build, so that the seeds and every crash the
// fuzzer once found stay covered without clang or libFuzzer.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "../fuzz/gguf_touch.h"

namespace colibri {
namespace {

TEST(GgufCorpus, EveryFileParsesOrThrowsError) {
  const std::filesystem::path dir = std::filesystem::path(COLIBRI_SOURCE_DIR) / "tests/fuzz/corpus";
  ASSERT_TRUE(std::filesystem::is_directory(dir)) << dir;
  size_t n_files = 0, n_seeds = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    std::ifstream in(e.path(), std::ios::binary);
    std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), {});
    std::string name = e.path().filename().string();
    SCOPED_TRACE(name);
    bool parsed = touch_gguf(bytes.data(), bytes.size());
    // Seeds are valid files written by GgufWriter; regression inputs
    // (crash-*, the fuzzer's findings) may go either way.
    if (name.rfind("seed-", 0) == 0) {
      EXPECT_TRUE(parsed);
      ++n_seeds;
    }
    ++n_files;
  }
  EXPECT_GE(n_seeds, 5u);
  RecordProperty("files", static_cast<int>(n_files));
}

}  // namespace
}  // namespace colibri
