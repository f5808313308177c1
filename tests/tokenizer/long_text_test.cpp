// A whole book through the tokenizer: War and Peace (3.2 MB) with Qwen2's
// vocabulary round-trips exactly. The encode time is printed as a one-off
// figure, not asserted (it depends on the machine and its load).
#include <gtest/gtest.h>

#include <chrono>
#include <ctime>
#include <cstdio>
#include <filesystem>

#include "formats/gguf.h"
#include "test_data.h"
#include "tokenizer/tokenizer.h"

namespace colibri {
namespace {

namespace fs = std::filesystem;

TEST(LongText, WarAndPeaceRoundTripsWithQwen2) {
  const fs::path text_path = test::shared_dir() / "data/text/war-and-peace.txt";
  const fs::path vocab_path = test::vocab_dir() / "ggml-vocab-qwen2.gguf";
  if (!fs::exists(text_path) || !fs::exists(vocab_path))
    GTEST_SKIP() << "test data absent: " << text_path << " or " << vocab_path;
  const std::string text = test::read_file(text_path);
  auto f = GgufFile::open(vocab_path.string());
  auto tok = Tokenizer::from_gguf(*f);

  const auto t0 = std::chrono::steady_clock::now();
  const std::clock_t c0 = std::clock();
  const std::vector<int32_t> ids = tok->encode(text, false, false);
  const std::clock_t c1 = std::clock();
  const auto t1 = std::chrono::steady_clock::now();
  const std::string back = tok->decode(ids, true, false);
  const auto t2 = std::chrono::steady_clock::now();

  const double enc_s = std::chrono::duration<double>(t1 - t0).count();
  const double dec_s = std::chrono::duration<double>(t2 - t1).count();
  const double enc_cpu_s = static_cast<double>(c1 - c0) / CLOCKS_PER_SEC;
  std::printf("war-and-peace.txt, qwen2: %zu bytes -> %zu tokens; encode %.3f s wall, %.3f s CPU "
              "(%.1f MB/s of CPU time), decode %.3f s\n",
              text.size(), ids.size(), enc_s, enc_cpu_s, text.size() / enc_cpu_s / 1e6, dec_s);
  EXPECT_TRUE(back == text) << "decode(encode(text)) differs from the text";
  // English prose: about 4 bytes per token for a 150k vocabulary.
  EXPECT_GT(ids.size(), text.size() / 6);
  EXPECT_LT(ids.size(), text.size() / 3);
}

}  // namespace
}  // namespace colibri
