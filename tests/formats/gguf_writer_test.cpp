// GgufWriter: output bytes against the GGUF spec and against files written by
// llama.cpp's tools (the golden models), and a round trip through GgufFile.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "formats/gguf.h"
#include "formats/gguf_writer.h"
#include "gguf_test_util.h"

namespace colibri {
namespace {

using test::iota_bytes;
using test::ThrowsErrorWith;

std::vector<uint8_t> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("colibri_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

// The smallest interesting file, assembled by hand from the GGUF spec
// (ggml/docs/gguf.md): little-endian header, one key-value pair, one tensor
// info, zero padding to the default alignment of 32, data padded to 32.
TEST(GgufWriter, MatchesSpecByteForByte) {
  GgufWriter w;
  w.set_u32("a", 7);
  float data[2] = {1.0f, 2.0f};
  std::vector<uint8_t> bytes(reinterpret_cast<uint8_t*>(data), reinterpret_cast<uint8_t*>(data) + 8);
  w.add_tensor("t", DType::F32, {2}, bytes);

  std::vector<uint8_t> expected = {
      'G', 'G', 'U', 'F', 3, 0, 0, 0,   // magic, version 3
      1, 0, 0, 0, 0, 0, 0, 0,           // tensor count
      1, 0, 0, 0, 0, 0, 0, 0,           // metadata count
      1, 0, 0, 0, 0, 0, 0, 0, 'a',      // key
      4, 0, 0, 0,                       // GGUF_TYPE_UINT32
      7, 0, 0, 0,                       // value
      1, 0, 0, 0, 0, 0, 0, 0, 't',      // tensor name
      1, 0, 0, 0,                       // n_dims
      2, 0, 0, 0, 0, 0, 0, 0,           // ne[0]
      0, 0, 0, 0,                       // GGML_TYPE_F32
      0, 0, 0, 0, 0, 0, 0, 0,           // offset in the data section
  };
  ASSERT_EQ(expected.size(), 74u);
  expected.resize(96, 0);  // padding to 32
  expected.insert(expected.end(), {0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0x40});  // 1.0f, 2.0f
  expected.resize(128, 0);  // the tensor is padded too

  EXPECT_EQ(w.to_bytes(), expected);
  GgufLayout l = w.layout();
  EXPECT_EQ(l.data_offset, 96u);
  EXPECT_EQ(l.file_size, 128u);
  EXPECT_EQ(l.kvs[0].key, 24u);
  EXPECT_EQ(l.kvs[0].type, 33u);
  EXPECT_EQ(l.tensors[0].offset, 66u);
  EXPECT_EQ(l.tensors[0].data, 96u);
}

template <typename T>
void expect_array(const GgufValue& v, GgufType et, const std::vector<T>& want) {
  ASSERT_EQ(v.type, GgufType::kArray);
  ASSERT_EQ(v.elem_type, et);
  ASSERT_EQ(v.count, want.size());
  if (!want.empty()) {
    EXPECT_EQ(std::memcmp(v.elems, want.data(), want.size() * sizeof(T)), 0);
  }
}

TEST(GgufWriter, EveryMetadataTypeRoundTrips) {
  GgufWriter w;
  w.set_u8("u8", 250);
  w.set_i8("i8", -128);
  w.set_u16("u16", 65535);
  w.set_i16("i16", -32768);
  w.set_u32("u32", 4000000000u);
  w.set_i32("i32", -2000000000);
  w.set_u64("u64", std::numeric_limits<uint64_t>::max());
  w.set_i64("i64", std::numeric_limits<int64_t>::min());
  w.set_f32("f32", -0.15625f);
  w.set_f64("f64", 1e300);
  w.set_bool("bool.true", true);
  w.set_bool("bool.false", false);
  w.set_string("str", std::string("h\xc3\xa9llo\0world", 12));
  w.set_string("str.empty", "");
  std::vector<uint8_t> au8 = {0, 1, 255};
  std::vector<int8_t> ai8 = {-128, 0, 127};
  std::vector<uint16_t> au16 = {0, 65535};
  std::vector<int16_t> ai16 = {-32768, 32767};
  std::vector<uint32_t> au32 = {0, 4294967295u, 7};
  std::vector<int32_t> ai32 = {-1, 2, -3};
  std::vector<uint64_t> au64 = {std::numeric_limits<uint64_t>::max(), 0};
  std::vector<int64_t> ai64 = {std::numeric_limits<int64_t>::min(), 5};
  std::vector<float> af32 = {1.5f, -0.0f, 3e38f};
  std::vector<double> af64 = {-2.25, 1e-300};
  std::vector<uint8_t> abool = {1, 0, 1, 1};
  w.set_array("a.u8", GgufType::kUint8, au8.data(), au8.size());
  w.set_array("a.i8", GgufType::kInt8, ai8.data(), ai8.size());
  w.set_array("a.u16", GgufType::kUint16, au16.data(), au16.size());
  w.set_array("a.i16", GgufType::kInt16, ai16.data(), ai16.size());
  w.set_array("a.u32", GgufType::kUint32, au32.data(), au32.size());
  w.set_array_i32("a.i32", ai32);
  w.set_array("a.u64", GgufType::kUint64, au64.data(), au64.size());
  w.set_array("a.i64", GgufType::kInt64, ai64.data(), ai64.size());
  w.set_array_f32("a.f32", af32);
  w.set_array("a.f64", GgufType::kFloat64, af64.data(), af64.size());
  w.set_array("a.bool", GgufType::kBool, abool.data(), abool.size());
  w.set_array_f32("a.empty", {});
  w.set_array_str("a.str", {"x", "", "long string with spaces"});
  w.set_array_str("a.str.empty", {});

  std::vector<uint8_t> bytes = w.to_bytes();
  auto f = GgufFile::parse(bytes.data(), bytes.size(), "rt.gguf");
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->metadata().size(), w.n_kv());
  EXPECT_TRUE(f->tensors().empty());

  EXPECT_EQ(f->find("u8")->type, GgufType::kUint8);
  EXPECT_EQ(*f->get_uint("u8"), 250u);
  EXPECT_EQ(f->find("i8")->type, GgufType::kInt8);
  EXPECT_EQ(f->find("i8")->i, -128);
  EXPECT_EQ(*f->get_uint("u16"), 65535u);
  EXPECT_EQ(f->find("i16")->i, -32768);
  EXPECT_EQ(*f->get_uint("u32"), 4000000000u);
  EXPECT_EQ(f->find("i32")->i, -2000000000);
  EXPECT_EQ(*f->get_uint("u64"), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(f->find("i64")->i, std::numeric_limits<int64_t>::min());
  EXPECT_EQ(f->find("f32")->type, GgufType::kFloat32);
  EXPECT_EQ(*f->get_float("f32"), -0.15625);
  EXPECT_EQ(f->find("f64")->type, GgufType::kFloat64);
  EXPECT_EQ(*f->get_float("f64"), 1e300);
  EXPECT_EQ(*f->get_float("i32"), -2000000000.0);
  EXPECT_EQ(*f->get_bool("bool.true"), true);
  EXPECT_EQ(*f->get_bool("bool.false"), false);
  EXPECT_EQ(*f->get_string("str"), std::string_view("h\xc3\xa9llo\0world", 12));
  EXPECT_EQ(*f->get_string("str.empty"), "");

  expect_array(*f->find("a.u8"), GgufType::kUint8, au8);
  expect_array(*f->find("a.i8"), GgufType::kInt8, ai8);
  expect_array(*f->find("a.u16"), GgufType::kUint16, au16);
  expect_array(*f->find("a.i16"), GgufType::kInt16, ai16);
  expect_array(*f->find("a.u32"), GgufType::kUint32, au32);
  expect_array(*f->find("a.i32"), GgufType::kInt32, ai32);
  expect_array(*f->find("a.u64"), GgufType::kUint64, au64);
  expect_array(*f->find("a.i64"), GgufType::kInt64, ai64);
  expect_array(*f->find("a.f32"), GgufType::kFloat32, af32);
  expect_array(*f->find("a.f64"), GgufType::kFloat64, af64);
  expect_array(*f->find("a.bool"), GgufType::kBool, abool);
  expect_array(*f->find("a.empty"), GgufType::kFloat32, std::vector<float>{});
  EXPECT_EQ(*f->get_f32_array("a.f32"), af32);
  EXPECT_EQ(*f->get_int_array("a.i16"), (std::vector<int64_t>{-32768, 32767}));
  const auto* strs = f->get_string_array("a.str");
  ASSERT_NE(strs, nullptr);
  EXPECT_EQ(*strs, (std::vector<std::string_view>{"x", "", "long string with spaces"}));
  EXPECT_TRUE(f->get_string_array("a.str.empty")->empty());

  // Keys come back in insertion order.
  EXPECT_EQ(f->metadata().front().key, "u8");
  EXPECT_EQ(f->metadata().back().key, "a.str.empty");
}

TEST(GgufWriter, SettingAKeyAgainReplacesItInPlace) {
  GgufWriter w;
  w.set_u32("first", 1);
  w.set_u32("second", 2);
  w.set_string("first", "now a string");
  std::vector<uint8_t> bytes = w.to_bytes();
  auto f = GgufFile::parse(bytes.data(), bytes.size(), "replace.gguf");
  ASSERT_EQ(f->metadata().size(), 2u);
  EXPECT_EQ(f->metadata()[0].key, "first");
  EXPECT_EQ(*f->get_string("first"), "now a string");
  EXPECT_EQ(*f->get_uint("second"), 2u);
}

// Bytes per block of each type, from ggml's block structs (ggml-common.h),
// written out here so the sizes are not checked against themselves.
struct TypeCase {
  DType type;
  int64_t block_elems;
  size_t block_bytes;
};
constexpr TypeCase kTypeCases[] = {
    {DType::F32, 1, 4},     {DType::F16, 1, 2},      {DType::BF16, 1, 2},
    {DType::Q4_0, 32, 18},  {DType::Q4_1, 32, 20},   {DType::Q5_0, 32, 22},
    {DType::Q5_1, 32, 24},  {DType::Q8_0, 32, 34},   {DType::Q2_K, 256, 84},
    {DType::Q3_K, 256, 110}, {DType::Q4_K, 256, 144}, {DType::Q5_K, 256, 176},
    {DType::Q6_K, 256, 210}, {DType::MXFP4, 32, 17},
};

class GgufWriterAlignment : public testing::TestWithParam<size_t> {};

TEST_P(GgufWriterAlignment, TensorsOfEveryWeightTypeRoundTrip) {
  const size_t alignment = GetParam();
  GgufWriter w;
  w.set_string("general.architecture", "test");
  if (alignment != 32) w.set_alignment(alignment);
  struct Want {
    std::string name;
    DType type;
    std::vector<int64_t> ne;
    std::vector<uint8_t> data;
  };
  std::vector<Want> want;
  int i = 0;
  for (const TypeCase& tc : kTypeCases) {
    // Rows of two blocks; 1 to 4 dims, cycling, with odd sizes so that
    // padding is needed.
    std::vector<int64_t> ne = {2 * tc.block_elems};
    for (int d = 1; d <= i % 4; ++d) ne.push_back(d + 2);
    int64_t rows = 1;
    for (size_t d = 1; d < ne.size(); ++d) rows *= ne[d];
    size_t nbytes = 2 * tc.block_bytes * rows;
    Want wt{"t" + std::to_string(i) + "." + dtype_name(tc.type), tc.type, ne,
            iota_bytes(nbytes, static_cast<uint8_t>(i))};
    w.add_tensor(wt.name, wt.type, wt.ne, wt.data);
    want.push_back(wt);
    ++i;
  }
  std::vector<uint8_t> bytes = w.to_bytes();
  GgufLayout l = w.layout();
  EXPECT_EQ(bytes.size(), l.file_size);
  auto f = GgufFile::parse(bytes.data(), bytes.size(), "types.gguf");
  EXPECT_EQ(f->alignment(), alignment);
  EXPECT_EQ(f->data_offset(), l.data_offset);
  EXPECT_EQ(f->data_offset() % alignment, 0u);
  ASSERT_EQ(f->tensors().size(), want.size());
  for (size_t k = 0; k < want.size(); ++k) {
    const GgufTensor* t = f->find_tensor(want[k].name);
    ASSERT_NE(t, nullptr) << want[k].name;
    EXPECT_EQ(t->type, want[k].type);
    EXPECT_EQ(t->n_dims, static_cast<int>(want[k].ne.size()));
    for (size_t d = 0; d < want[k].ne.size(); ++d) EXPECT_EQ(t->ne[d], want[k].ne[d]);
    EXPECT_EQ(t->nbytes, want[k].data.size()) << want[k].name;
    EXPECT_EQ(t->offset, l.tensors[k].data);
    EXPECT_EQ((t->offset - f->data_offset()) % alignment, 0u);
    EXPECT_EQ(std::memcmp(f->tensor_data(*t), want[k].data.data(), t->nbytes), 0) << want[k].name;
  }
  // Padding is zeros, from the end of the infos to the data, and after each tensor.
  size_t infos_end = l.tensors.back().offset + 8;
  for (size_t p = infos_end; p < l.data_offset; ++p) ASSERT_EQ(bytes[p], 0) << p;
  for (size_t k = 0; k < want.size(); ++k) {
    size_t end = l.tensors[k].data + l.tensors[k].nbytes;
    size_t next = k + 1 < want.size() ? l.tensors[k + 1].data : l.file_size;
    for (size_t p = end; p < next; ++p) ASSERT_EQ(bytes[p], 0) << p;
  }
}

INSTANTIATE_TEST_SUITE_P(Alignments, GgufWriterAlignment, testing::Values(1, 8, 32, 64, 4096));

TEST(GgufWriter, FilledTensorsEqualGivenBytesAndAreProducedInRowChunks) {
  // 4096 x 1100 f32 is 17.2 MiB: more than one fill chunk.
  const int64_t n0 = 4096, n1 = 1100;
  std::vector<uint8_t> data = iota_bytes(static_cast<size_t>(n0 * n1 * 4), 9);
  GgufWriter given, filled;
  for (GgufWriter* w : {&given, &filled}) w->set_u32("x", 1);
  given.add_tensor("small", DType::Q4_0, {64, 3}, iota_bytes(3 * 2 * 18, 4));
  given.add_tensor("big", DType::F32, {n0, n1}, data);
  filled.add_tensor_info("small", DType::Q4_0, {64, 3}, [](int64_t r0, int64_t n, uint8_t* dst) {
    std::vector<uint8_t> all = iota_bytes(3 * 2 * 18, 4);
    std::memcpy(dst, all.data() + r0 * 36, n * 36);
  });
  int64_t next_row = 0;
  int calls = 0;
  filled.add_tensor_info("big", DType::F32, {n0, n1}, [&](int64_t r0, int64_t n, uint8_t* dst) {
    EXPECT_EQ(r0, next_row);
    EXPECT_GT(n, 0);
    next_row = r0 + n;
    ++calls;
    std::memcpy(dst, data.data() + r0 * n0 * 4, n * n0 * 4);
  });
  std::vector<uint8_t> a = given.to_bytes();
  std::vector<uint8_t> b = filled.to_bytes();
  EXPECT_EQ(next_row, n1);
  EXPECT_GE(calls, 2);
  EXPECT_TRUE(a == b);
}

TEST(GgufWriter, WritesAFileThatOpensAndLeavesNoTemporary) {
  GgufWriter w = test::small_model();
  std::string path = temp_path("write.gguf");
  w.write(path);
  EXPECT_EQ(read_all(path), w.to_bytes());
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  auto f = GgufFile::open(path);
  EXPECT_EQ(f->tensors().size(), 3u);
  ASSERT_EQ(f->parts().size(), 1u);
  EXPECT_GE(f->parts()[0].fd, 0);
  f.reset();
  std::filesystem::remove(path);

  std::string bad = temp_path("no-such-dir/x.gguf");
  EXPECT_TRUE(ThrowsErrorWith([&] { w.write(bad); }, {bad + ".tmp", "cannot create"}));
}

TEST(GgufWriter, RefusesInconsistentInput) {
  GgufWriter w;
  EXPECT_TRUE(ThrowsErrorWith(
      [&] { w.add_tensor("blk.0.x", DType::F32, {4, 2}, std::vector<uint8_t>(31)); },
      {"blk.0.x", "expected 32 bytes", "got 31"}));
  EXPECT_EQ(w.n_tensors(), 0u);
  EXPECT_TRUE(ThrowsErrorWith(
      [&] { w.add_tensor("q", DType::Q4_K, {128}, std::vector<uint8_t>(72)); },
      {"tensor q", "row length 128", "q4_K block size 256"}));
  EXPECT_TRUE(ThrowsErrorWith(
      [&] { w.add_tensor("five", DType::F32, {1, 1, 1, 1, 1}, std::vector<uint8_t>(4)); },
      {"five", "1 to 4 dims", "got 5"}));
  EXPECT_TRUE(ThrowsErrorWith(
      [&] { w.add_tensor("zero", DType::F32, {4, 0}, {}); }, {"zero", "dimension 1 is 0"}));
  EXPECT_TRUE(ThrowsErrorWith(
      [&] { w.add_tensor(std::string(64, 'n'), DType::F32, {1}, std::vector<uint8_t>(4)); },
      {"is 64 bytes", "1 to 63"}));
  w.add_tensor("dup", DType::F32, {1}, std::vector<uint8_t>(4));
  EXPECT_TRUE(ThrowsErrorWith(
      [&] { w.add_tensor("dup", DType::F32, {1}, std::vector<uint8_t>(4)); }, {"dup", "twice"}));
  EXPECT_TRUE(ThrowsErrorWith([&] { w.set_alignment(48); }, {"alignment 48", "power of two"}));
  EXPECT_TRUE(ThrowsErrorWith([&] { w.set_u64("general.alignment", 64); },
                              {"general.alignment", "uint32", "uint64"}));
  EXPECT_TRUE(ThrowsErrorWith([&] { w.set_u32("general.alignment", 0); },
                              {"general.alignment", "0 is not a power of two"}));
  EXPECT_EQ(w.alignment(), 32u);
  uint8_t bad_bool = 2;
  EXPECT_TRUE(ThrowsErrorWith([&] { w.set_array("b", GgufType::kBool, &bad_bool, 1); },
                              {"key b", "bool element 0 is 2"}));
  EXPECT_TRUE(ThrowsErrorWith([&] { w.set_array("s", GgufType::kString, nullptr, 0); },
                              {"key s", "scalar element type", "string"}));
}

// Re-writing a file made by llama.cpp's tools (gguf-py) from what GgufFile
// reads must give back the same bytes: same key order and encoding, same
// tensor order, offsets and padding.
TEST(GgufWriter, RewritesGoldenModelsByteForByte) {
  const std::filesystem::path golden = std::filesystem::path(COLIBRI_SHARED_DIR) / "golden";
  if (!std::filesystem::exists(golden / "qwen3moe-f32.gguf"))
    GTEST_SKIP() << "golden models not found under " << golden;
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(golden))
    if (e.path().extension() == ".gguf") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  ASSERT_FALSE(files.empty());
  for (const auto& path : files) {
    SCOPED_TRACE(path.filename().string());
    auto f = GgufFile::open(path.string());
    GgufWriter w;
    for (const GgufKV& kv : f->metadata()) w.set_value(kv.key, kv.value);
    for (const GgufTensor& t : f->tensors()) {
      std::vector<int64_t> ne(t.ne, t.ne + t.n_dims);
      const uint8_t* p = f->tensor_data(t);
      w.add_tensor(t.name, t.type, ne, std::vector<uint8_t>(p, p + t.nbytes));
    }
    std::vector<uint8_t> original = read_all(path.string());
    std::vector<uint8_t> rewritten = w.to_bytes();
    ASSERT_EQ(rewritten.size(), original.size());
    size_t first_diff = 0;
    while (first_diff < original.size() && original[first_diff] == rewritten[first_diff])
      ++first_diff;
    EXPECT_EQ(first_diff, original.size()) << "first differing byte";
  }
}

}  // namespace
}  // namespace colibri
