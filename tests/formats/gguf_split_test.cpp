// Split GGUF models (llama.cpp's gguf-split: PREFIX-00001-of-0000N.gguf ...)
// open by their first file as one model: the first file's metadata, every
// file's tensors with their bytes, and the same refusals llama.cpp makes
// (a file that is not the first, a missing file, a file out of place, a
// tensor count that does not add up, a tensor given twice).
#include "../gguf_split.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "../process_tmp_dir.h"
#include "formats/gguf.h"
#include "formats/gguf_writer.h"
#include "gguf_test_util.h"

namespace colibri {
namespace {

namespace fs = std::filesystem;
using test::ThrowsErrorWith;

ProcessTmpDir& tmp() {
  static ProcessTmpDir d("colibri-split-test-");
  return d;
}

// A model of 10 tensors of different sizes and types, and a few keys.
std::unique_ptr<GgufFile> small_model(std::vector<uint8_t>& bytes) {
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_u32("llama.block_count", 3);
  w.set_array_str("tokenizer.ggml.tokens", {"a", "b", "c"});
  for (int i = 0; i < 10; ++i) {
    const int64_t n = 32 * (i + 1);
    std::vector<uint8_t> d(static_cast<size_t>(n) * 4);
    for (size_t k = 0; k < d.size(); ++k) d[k] = static_cast<uint8_t>(k * 7 + i);
    w.add_tensor("t" + std::to_string(i), DType::F32, {n}, std::move(d));
  }
  bytes = w.to_bytes();
  return GgufFile::parse(bytes.data(), bytes.size(), "small.gguf");
}

TEST(GgufSplit, OpensAsOneModel) {
  std::vector<uint8_t> bytes;
  auto src = small_model(bytes);
  const std::string prefix = (tmp().path / "m").string();
  const auto paths = test::write_split_gguf(*src, prefix, 3);
  auto f = GgufFile::open(paths[0]);
  ASSERT_EQ(f->parts().size(), 3u);
  uint64_t on_disk = 0;
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(f->parts()[i].path, paths[i]);
    EXPECT_EQ(f->parts()[i].size, fs::file_size(paths[i]));
    EXPECT_EQ(f->parts()[i].begin % MappedFile::kPartAlign, 0u);
    on_disk += f->parts()[i].size;
  }
  EXPECT_EQ(f->bytes_on_disk(), on_disk);
  EXPECT_EQ(f->require_string("general.architecture"), "llama");
  EXPECT_EQ(f->get_uint("llama.block_count"), 3u);
  EXPECT_EQ(f->get_uint("split.count"), 3u);
  ASSERT_EQ(f->tensors().size(), src->tensors().size());
  for (size_t i = 0; i < src->tensors().size(); ++i) {
    const GgufTensor& want = src->tensors()[i];
    const GgufTensor* got = f->find_tensor(want.name);
    ASSERT_NE(got, nullptr) << want.name;
    ASSERT_EQ(got->nbytes, want.nbytes);
    // Each tensor lies in the file it was written to.
    size_t part = 0;  // write_split_gguf's cut: file k holds [n k / 3, n (k + 1) / 3)
    while (src->tensors().size() * (part + 1) / 3 <= i) ++part;
    const MappedFile::Part& p = f->parts()[part];
    EXPECT_GE(got->offset, p.begin + f->data_offset() * (part == 0)) << want.name;
    EXPECT_LE(got->offset + got->nbytes, p.begin + p.size) << want.name;
    EXPECT_EQ(std::memcmp(f->tensor_data(*got), src->tensor_data(want), want.nbytes), 0)
        << want.name;
  }
}

// A file that is not split opens as before; a split of one file is one file.
TEST(GgufSplit, OneFile) {
  std::vector<uint8_t> bytes;
  auto src = small_model(bytes);
  const auto paths = test::write_split_gguf(*src, (tmp().path / "one").string(), 1);
  auto f = GgufFile::open(paths[0]);
  EXPECT_EQ(f->parts().size(), 1u);
  EXPECT_EQ(f->tensors().size(), 10u);
}

TEST(GgufSplit, RefusesWhatLlamaCppRefuses) {
  std::vector<uint8_t> bytes;
  auto src = small_model(bytes);
  const std::string dir = tmp().path.string();

  // Not the first file.
  auto paths = test::write_split_gguf(*src, dir + "/a", 3);
  EXPECT_TRUE(
      ThrowsErrorWith([&] { GgufFile::open(paths[1]); },
                      {paths[1], "file 2 of a model split in 3 files; open the first", paths[0]}));
  // A file missing.
  fs::remove(paths[2]);
  EXPECT_TRUE(ThrowsErrorWith([&] { GgufFile::open(paths[0]); }, {paths[2], "cannot open"}));

  // Renamed, so the others cannot be found.
  paths = test::write_split_gguf(*src, dir + "/b", 2);
  fs::rename(paths[0], dir + "/b-first.gguf");
  EXPECT_TRUE(ThrowsErrorWith(
      [&] { GgufFile::open(dir + "/b-first.gguf"); },
      {"file 1 of a model split in 2 files, but not named PREFIX-00001-of-00002.gguf"}));

  // A file that says it is another.
  paths = test::write_split_gguf(*src, dir + "/c", 3, [](int no, GgufWriter& w) {
    if (no == 2) w.set_u16("split.no", 1);
  });
  EXPECT_TRUE(
      ThrowsErrorWith([&] { GgufFile::open(paths[0]); },
                      {paths[2], "key split.no is 1, but the file's name makes it file 2 of 3"}));

  // A file of another split.
  paths = test::write_split_gguf(*src, dir + "/d", 3, [](int no, GgufWriter& w) {
    if (no == 1) w.set_u16("split.count", 4);
  });
  EXPECT_TRUE(ThrowsErrorWith([&] { GgufFile::open(paths[0]); },
                              {paths[1], "key split.count is 4, but the first file's is 3"}));

  // Tensors that do not add up.
  paths = test::write_split_gguf(*src, dir + "/e", 2, [](int no, GgufWriter& w) {
    if (no == 0) w.set_i32("split.tensors.count", 11);
  });
  EXPECT_TRUE(ThrowsErrorWith([&] { GgufFile::open(paths[0]); },
                              {"key split.tensors.count is 11, but the 2 files hold 10 tensors"}));
  paths = test::write_split_gguf(*src, dir + "/f", 2, [](int no, GgufWriter& w) {
    if (no == 1) w.add_tensor("t0", DType::F32, {1}, std::vector<uint8_t>(4));
  });
  EXPECT_TRUE(ThrowsErrorWith([&] { GgufFile::open(paths[0]); },
                              {paths[1], "tensor t0 is also in an earlier file of the split"}));

  // A truncated second file: its own tensor table is checked.
  paths = test::write_split_gguf(*src, dir + "/g", 2);
  fs::resize_file(paths[1], fs::file_size(paths[1]) - 8);
  EXPECT_TRUE(ThrowsErrorWith([&] { GgufFile::open(paths[0]); }, {paths[1]}));

  // split.no missing in the first file.
  paths = test::write_split_gguf(*src, dir + "/h", 2);
  GgufWriter w;
  w.set_u16("split.count", 2);
  w.add_tensor("x", DType::F32, {1}, std::vector<uint8_t>(4));
  w.write(paths[0]);
  EXPECT_TRUE(
      ThrowsErrorWith([&] { GgufFile::open(paths[0]); }, {paths[0], "key split.no is missing"}));
}

}  // namespace
}  // namespace colibri
