// Hostile GGUF files: each must give an Error whose message names what is
// wrong and where, never a crash, a hang or a huge allocation. Files are a
// valid model written by GgufWriter with fields patched at the offsets its
// layout reports.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "formats/gguf.h"
#include "formats/gguf_writer.h"
#include "gguf_test_util.h"

namespace colibri {
namespace {

using test::kv_field;
using test::ParseFailsWith;
using test::patch;
using test::ThrowsErrorWith;

struct Model {
  GgufWriter w = test::small_model();
  std::vector<uint8_t> bytes = w.to_bytes();
  GgufLayout l = w.layout();
};

constexpr uint64_t k2p63 = uint64_t{1} << 63;

TEST(GgufHostile, TheBaseModelParses) {
  Model m;
  auto f = GgufFile::parse(m.bytes.data(), m.bytes.size(), "ok.gguf");
  EXPECT_EQ(f->tensors().size(), 3u);
  EXPECT_EQ(f->metadata().size(), 9u);
  // The last tensor ends at the end of the file, so every prefix is truncated.
  EXPECT_EQ(m.l.tensors.back().data + m.l.tensors.back().nbytes, m.bytes.size());
}

TEST(GgufHostile, EmptyInput) {
  EXPECT_TRUE(ParseFailsWith({}, {"bad.gguf", "0 bytes", "too short"}));
}

TEST(GgufHostile, WrongMagic) {
  Model m;
  m.bytes[0] = 'L';
  EXPECT_TRUE(ParseFailsWith(m.bytes, {"bad.gguf", "not a GGUF file", "magic"}));
}

TEST(GgufHostile, UnsupportedVersions) {
  for (uint32_t v : {0u, 1u, 4u, 0x03000000u}) {
    Model m;
    patch<uint32_t>(m.bytes, GgufLayout::kVersion, v);
    EXPECT_TRUE(ParseFailsWith(m.bytes, {"bad.gguf", "version " + std::to_string(v),
                                         "not supported"}));
  }
}

TEST(GgufHostile, VersionTwoIsRead) {
  Model m;
  patch<uint32_t>(m.bytes, GgufLayout::kVersion, 2);
  auto f = GgufFile::parse(m.bytes.data(), m.bytes.size(), "v2.gguf");
  EXPECT_EQ(f->version(), 2u);
}

// Every proper prefix of the file is refused, naming the file; the error says
// the input is truncated (or that a count cannot fit in what is left).
TEST(GgufHostile, EveryTruncation) {
  Model m;
  for (size_t n = 0; n < m.bytes.size(); ++n) {
    std::vector<uint8_t> prefix(m.bytes.begin(), m.bytes.begin() + n);
    try {
      GgufFile::parse(prefix.data(), prefix.size(), "cut.gguf");
      ADD_FAILURE() << "prefix of " << n << " bytes parsed";
    } catch (const Error& e) {
      std::string msg = e.what();
      EXPECT_NE(msg.find("cut.gguf"), std::string::npos) << msg;
      EXPECT_TRUE(msg.find("truncated") != std::string::npos ||
                  msg.find("cannot fit") != std::string::npos ||
                  msg.find("too short") != std::string::npos)
          << "prefix " << n << ": " << msg;
    }
  }
}

TEST(GgufHostile, TruncatedAfterLastTensorDataOnlyLosesPadding) {
  // A tensor whose data ends before the file's last padding: a file cut just
  // after its data still holds every byte a reader needs (ggml reads it too).
  GgufWriter w;
  w.add_tensor("t", DType::F32, {3}, std::vector<uint8_t>(12, 7));
  std::vector<uint8_t> b = w.to_bytes();
  GgufLayout l = w.layout();
  size_t end = l.tensors[0].data + 12;
  ASSERT_LT(end, b.size());
  b.resize(end);
  auto f = GgufFile::parse(b.data(), b.size(), "short.gguf");
  EXPECT_EQ(f->tensor_data(f->tensors()[0])[11], 7);
  b.pop_back();
  EXPECT_TRUE(ParseFailsWith(b, {"bad.gguf", "tensor t", "outside the file"}));
}

TEST(GgufHostile, HugeCountsAreRefusedBeforeAllocating) {
  for (uint64_t n : {k2p63, ~uint64_t{0}, uint64_t{1} << 40}) {
    Model m;
    patch<uint64_t>(m.bytes, GgufLayout::kTensorCount, n);
    EXPECT_TRUE(ParseFailsWith(m.bytes, {"bad.gguf", "tensor count " + std::to_string(n),
                                         "cannot fit"}));
    Model k;
    patch<uint64_t>(k.bytes, GgufLayout::kMetadataCount, n);
    EXPECT_TRUE(ParseFailsWith(k.bytes, {"bad.gguf", "metadata count " + std::to_string(n),
                                         "cannot fit"}));
  }
}

TEST(GgufHostile, HugeKeyLength) {
  Model m;
  patch<uint64_t>(m.bytes, m.l.kvs[2].key, k2p63);
  EXPECT_TRUE(ParseFailsWith(m.bytes, {"bad.gguf", "metadata #2 key", "truncated",
                                       "need 9223372036854775808 bytes"}));
}

TEST(GgufHostile, LongKeyThatFits) {
  // A 100000-byte key is present in the file but no real model has one.
  GgufWriter w;
  w.set_u32(std::string(100000, 'k'), 1);
  std::vector<uint8_t> b = w.to_bytes();
  EXPECT_TRUE(ParseFailsWith(b, {"bad.gguf", "metadata #0 key", "100000 bytes long"}));
}

TEST(GgufHostile, HugeStringLength) {
  Model m;
  patch<uint64_t>(m.bytes, kv_field(m.l, m.bytes, "general.name").value, k2p63 + 5);
  EXPECT_TRUE(ParseFailsWith(m.bytes, {"bad.gguf", "key general.name", "truncated"}));
}

TEST(GgufHostile, HugeStringInArray) {
  Model m;
  // tokens = ["a", "b", "c"]: the second string's length follows the first.
  size_t second = kv_field(m.l, m.bytes, "tokenizer.ggml.tokens").value + 4 + 8 + 9;
  patch<uint64_t>(m.bytes, second, ~uint64_t{0});
  EXPECT_TRUE(ParseFailsWith(m.bytes, {"bad.gguf", "key tokenizer.ggml.tokens", "truncated"}));
}

TEST(GgufHostile, HugeArrayCounts) {
  for (const char* key : {"tokenizer.ggml.tokens", "tokenizer.ggml.scores"}) {
    for (uint64_t n : {k2p63, ~uint64_t{0}, uint64_t{1} << 61}) {
      Model m;
      patch<uint64_t>(m.bytes, kv_field(m.l, m.bytes, key).value + 4, n);
      EXPECT_TRUE(ParseFailsWith(m.bytes, {"bad.gguf", std::string("key ") + key,
                                           std::to_string(n), "cannot fit"}));
    }
  }
}

TEST(GgufHostile, UnknownValueType) {
  for (uint32_t t : {13u, 99u, 0xffffffffu}) {
    Model m;
    patch<uint32_t>(m.bytes, kv_field(m.l, m.bytes, "qwen3moe.block_count").type, t);
    EXPECT_TRUE(ParseFailsWith(m.bytes, {"bad.gguf", "key qwen3moe.block_count",
                                         "unknown value type " + std::to_string(t)}));
  }
  Model m;
  patch<uint32_t>(m.bytes, kv_field(m.l, m.bytes, "tokenizer.ggml.scores").value, 13);
  EXPECT_TRUE(ParseFailsWith(m.bytes, {"key tokenizer.ggml.scores", "array of unknown type 13"}));
}

TEST(GgufHostile, NestedArray) {
  Model m;
  patch<uint32_t>(m.bytes, kv_field(m.l, m.bytes, "tokenizer.ggml.token_type").value, 9);
  EXPECT_TRUE(ParseFailsWith(m.bytes, {"bad.gguf", "key tokenizer.ggml.token_type", "nested"}));
}

TEST(GgufHostile, BadBool) {
  Model m;
  m.bytes[kv_field(m.l, m.bytes, "tiny.flag").value] = 2;
  EXPECT_TRUE(ParseFailsWith(m.bytes, {"bad.gguf", "key tiny.flag", "bool value 2"}));

  GgufWriter w;
  uint8_t flags[3] = {0, 1, 0};
  w.set_array("flags", GgufType::kBool, flags, 3);
  std::vector<uint8_t> b = w.to_bytes();
  b[w.layout().kvs[0].value + 12 + 2] = 0xff;
  EXPECT_TRUE(ParseFailsWith(b, {"bad.gguf", "key flags", "bool element 2 is 255"}));
}

TEST(GgufHostile, DuplicateKey) {
  Model m;
  // Rename tokenizer.ggml.scores to tokenizer.ggml.tokens (same length).
  const GgufLayout::Kv& kv = kv_field(m.l, m.bytes, "tokenizer.ggml.scores");
  std::string dup = "tokenizer.ggml.tokens";
  ASSERT_EQ(dup.size(), std::string("tokenizer.ggml.scores").size());
  std::memcpy(m.bytes.data() + kv.key + 8, dup.data(), dup.size());
  EXPECT_TRUE(ParseFailsWith(m.bytes, {"bad.gguf", "key tokenizer.ggml.tokens", "twice"}));
}

TEST(GgufHostile, DuplicateTensorName) {
  GgufWriter w;
  w.add_tensor("a.weight", DType::F32, {2}, std::vector<uint8_t>(8));
  w.add_tensor("b.weight", DType::F32, {2}, std::vector<uint8_t>(8));
  std::vector<uint8_t> b = w.to_bytes();
  b[w.layout().tensors[1].name + 8] = 'a';
  EXPECT_TRUE(ParseFailsWith(b, {"bad.gguf", "tensor a.weight", "twice"}));
}

TEST(GgufHostile, DimensionCounts) {
  for (uint32_t nd : {0u, 5u, 0xffffffffu}) {
    Model m;
    patch<uint32_t>(m.bytes, m.l.tensors[1].n_dims, nd);
    EXPECT_TRUE(ParseFailsWith(m.bytes, {"bad.gguf", "tensor blk.0.ffn_up_exps.weight",
                                         "expected 1 to 4 dims", "file has " + std::to_string(nd)}));
  }
}

TEST(GgufHostile, ZeroAndHugeDimensions) {
  Model m;
  patch<uint64_t>(m.bytes, m.l.tensors[1].ne + 8 * 2, 0);
  EXPECT_TRUE(ParseFailsWith(m.bytes, {"tensor blk.0.ffn_up_exps.weight", "dimension 2 is 0"}));
  Model h;
  patch<uint64_t>(h.bytes, h.l.tensors[0].ne, ~uint64_t{0});
  EXPECT_TRUE(ParseFailsWith(h.bytes, {"tensor token_embd.weight", "dimension 0 is 18446744073709551615"}));
}

TEST(GgufHostile, ElementCountOverflow) {
  Model m;
  // Three dims of 2^30 (each allowed alone) overflow any sane element count.
  for (int d = 0; d < 3; ++d) patch<uint64_t>(m.bytes, m.l.tensors[1].ne + 8 * d, uint64_t{1} << 30);
  EXPECT_TRUE(ParseFailsWith(m.bytes, {"tensor blk.0.ffn_up_exps.weight", "element count overflows"}));
}

TEST(GgufHostile, UnknownAndUnsupportedTensorTypes) {
  struct Case {
    uint32_t id;
    const char* name;
  };
  for (Case c : {Case{99, "unknown"}, Case{34, "tq1_0"}, Case{35, "tq2_0"}, Case{41, "q1_0"},
                 Case{40, "nvfp4"}, Case{15, "q8_K"}, Case{4, "q4_2"}}) {
    Model m;
    patch<uint32_t>(m.bytes, m.l.tensors[1].type, c.id);
    EXPECT_TRUE(ParseFailsWith(m.bytes, {"bad.gguf", "tensor blk.0.ffn_up_exps.weight",
                                         "tensor type " + std::to_string(c.id), c.name,
                                         "not supported"}));
  }
}

TEST(GgufHostile, RowLengthNotAMultipleOfTheBlock) {
  Model m;
  patch<uint64_t>(m.bytes, m.l.tensors[1].ne, 48);
  EXPECT_TRUE(ParseFailsWith(m.bytes, {"tensor blk.0.ffn_up_exps.weight", "row length 48",
                                       "q8_0 block size 32"}));
}

TEST(GgufHostile, MisalignedOffset) {
  Model m;
  uint64_t off;
  std::memcpy(&off, m.bytes.data() + m.l.tensors[1].offset, 8);
  patch<uint64_t>(m.bytes, m.l.tensors[1].offset, off + 4);
  EXPECT_TRUE(ParseFailsWith(m.bytes, {"tensor blk.0.ffn_up_exps.weight",
                                       "offset " + std::to_string(off + 4),
                                       "not a multiple of alignment 32"}));
}

TEST(GgufHostile, TensorOutsideTheFile) {
  for (uint64_t off : {uint64_t{1} << 20, ~uint64_t{0} - 31, uint64_t{32}}) {
    Model m;
    patch<uint64_t>(m.bytes, m.l.tensors[2].offset, off);
    if (off == 32) {
      // In bounds (it overlaps another tensor, which readers allow).
      EXPECT_NO_THROW(GgufFile::parse(m.bytes.data(), m.bytes.size(), "ok.gguf"));
      continue;
    }
    EXPECT_TRUE(ParseFailsWith(m.bytes, {"bad.gguf", "tensor output_norm.weight",
                                         "outside the file"}));
  }
}

TEST(GgufHostile, BadAlignmentKey) {
  for (uint32_t al : {0u, 48u, 3u, 1u << 21}) {
    GgufWriter w = test::small_model();
    w.set_u32("general.alignmenT", al);  // patched below: the writer refuses bad alignments
    std::vector<uint8_t> b = w.to_bytes();
    const GgufLayout l = w.layout();
    b[l.kvs.back().key + 8 + std::string("general.alignmen").size()] = 't';
    EXPECT_TRUE(ParseFailsWith(b, {"bad.gguf", "key general.alignment", "power of two",
                                   "file has " + std::to_string(al)}));
  }
  GgufWriter w = test::small_model();
  w.set_string("general.alignmenT", "32");
  std::vector<uint8_t> b = w.to_bytes();
  b[w.layout().kvs.back().key + 8 + std::string("general.alignmen").size()] = 't';
  EXPECT_TRUE(ParseFailsWith(b, {"bad.gguf", "key general.alignment", "expected an integer",
                                 "file has string"}));
}

TEST(GgufHostile, WrongTypedGetters) {
  Model m;
  auto f = GgufFile::parse(m.bytes.data(), m.bytes.size(), "typed.gguf");
  EXPECT_TRUE(ThrowsErrorWith([&] { f->get_uint("general.name"); },
                              {"typed.gguf", "key general.name", "expected an integer", "string"}));
  EXPECT_TRUE(ThrowsErrorWith([&] { f->get_string("qwen3moe.block_count"); },
                              {"key qwen3moe.block_count", "expected string", "uint32"}));
  EXPECT_TRUE(ThrowsErrorWith([&] { f->get_bool("qwen3moe.block_count"); },
                              {"key qwen3moe.block_count", "expected bool", "uint32"}));
  EXPECT_TRUE(ThrowsErrorWith([&] { f->get_float("general.name"); },
                              {"key general.name", "expected a number", "string"}));
  EXPECT_TRUE(ThrowsErrorWith([&] { f->get_string_array("tokenizer.ggml.scores"); },
                              {"key tokenizer.ggml.scores", "array of strings", "array of float32"}));
  EXPECT_TRUE(ThrowsErrorWith([&] { f->get_f32_array("tokenizer.ggml.token_type"); },
                              {"key tokenizer.ggml.token_type", "array of float32", "array of int32"}));
  EXPECT_TRUE(ThrowsErrorWith([&] { f->get_int_array("tokenizer.ggml.scores"); },
                              {"key tokenizer.ggml.scores", "array of integers", "float32"}));
  EXPECT_TRUE(ThrowsErrorWith([&] { f->get_int_array("general.name"); },
                              {"key general.name", "array of integers", "string"}));
  EXPECT_TRUE(ThrowsErrorWith([&] { f->require_uint("qwen3moe.expert_used_count"); },
                              {"typed.gguf", "required key qwen3moe.expert_used_count", "missing"}));
  EXPECT_TRUE(ThrowsErrorWith([&] { f->require_string("general.architecturE"); },
                              {"required key general.architecturE", "missing"}));
  EXPECT_FALSE(f->get_uint("no.such.key").has_value());
  EXPECT_EQ(f->get_string_array("no.such.key"), nullptr);
  EXPECT_EQ(f->require_string("general.architecture"), "qwen3moe");
}

TEST(GgufHostile, NegativeIntegerForAnUnsignedGetter) {
  GgufWriter w;
  w.set_i32("n", -3);
  std::vector<uint8_t> b = w.to_bytes();
  auto f = GgufFile::parse(b.data(), b.size(), "neg.gguf");
  EXPECT_TRUE(ThrowsErrorWith([&] { f->get_uint("n"); }, {"key n", "non-negative", "-3"}));
  EXPECT_EQ(*f->get_float("n"), -3.0);
}

class GgufHostileFiles : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("colibri_hostile_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(GgufHostileFiles, MissingPath) {
  std::string p = (dir_ / "missing.gguf").string();
  EXPECT_TRUE(ThrowsErrorWith([&] { GgufFile::open(p); }, {p, "cannot open", "No such file"}));
}

TEST_F(GgufHostileFiles, Directory) {
  std::string p = dir_.string();
  EXPECT_TRUE(ThrowsErrorWith([&] { GgufFile::open(p); }, {p, "is a folder, not a GGUF file"}));
  // A Hugging Face model folder: the error names the command that converts it.
  std::ofstream(dir_ / "config.json") << "{}";
  EXPECT_TRUE(ThrowsErrorWith([&] { GgufFile::open(p); }, {p, "colibri convert"}));
}

TEST_F(GgufHostileFiles, EmptyFile) {
  std::string p = (dir_ / "empty.gguf").string();
  std::ofstream(p).close();
  EXPECT_TRUE(ThrowsErrorWith([&] { GgufFile::open(p); }, {p, "empty"}));
}

TEST_F(GgufHostileFiles, TruncatedFileOnDisk) {
  Model m;
  std::string p = (dir_ / "cut.gguf").string();
  std::ofstream(p, std::ios::binary)
      .write(reinterpret_cast<const char*>(m.bytes.data()),
             static_cast<std::streamsize>(m.bytes.size() - 1));
  EXPECT_TRUE(ThrowsErrorWith([&] { GgufFile::open(p); },
                              {p, "tensor output_norm.weight", "outside the file"}));
}

}  // namespace
}  // namespace colibri
