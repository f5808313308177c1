// The safetensors reader, writer and model-folder set: byte-level reference
// files as the official library writes them, a writer round trip, every
// header rule refused with a message naming the problem, every truncation
// refused, and folders with a bad shard index.
#include "formats/safetensors.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "../process_tmp_dir.h"
#include "base/error.h"
#include "formats/safetensors_writer.h"
#include "gguf_test_util.h"

namespace colibri {
namespace {

namespace fs = std::filesystem;
using test::ThrowsErrorWith;

// A file as the official writer lays it out: length, header padded with
// spaces to a multiple of 8, data.
std::vector<uint8_t> st_bytes(std::string header, const std::vector<uint8_t>& data = {},
                              bool pad = true) {
  if (pad) header.append((8 - header.size() % 8) % 8, ' ');
  // resize + memcpy: GCC 12 reports a false -Warray-bounds on vector::insert.
  std::vector<uint8_t> out(8 + header.size() + data.size());
  uint64_t n = header.size();
  std::memcpy(out.data(), &n, 8);
  if (!header.empty()) std::memcpy(out.data() + 8, header.data(), header.size());
  if (!data.empty()) std::memcpy(out.data() + 8 + header.size(), data.data(), data.size());
  return out;
}

std::vector<uint8_t> f32_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(seed + i * 37);
  return b;
}

std::unique_ptr<SafetensorsFile> parse(const std::vector<uint8_t>& b) {
  return SafetensorsFile::parse(b.data(), b.size(), "t.safetensors");
}

testing::AssertionResult ParseFailsWith(const std::vector<uint8_t>& bytes,
                                        const std::vector<std::string>& parts) {
  std::vector<std::string> all = parts;
  all.insert(all.begin(), "bad.safetensors: ");
  return ThrowsErrorWith(
      [&] { SafetensorsFile::parse(bytes.data(), bytes.size(), "bad.safetensors"); }, all);
}

// A header of one tensor "a" with the given entry and 8 bytes of data.
testing::AssertionResult EntryFailsWith(const std::string& entry,
                                        const std::vector<std::string>& parts) {
  return ParseFailsWith(st_bytes("{\"a\":" + entry + "}", pattern(8, 1)), parts);
}

const fs::path& tmp_root() {
  static const ProcessTmpDir dir("colibri-safetensors-");
  return dir.path;
}

// A fresh folder for one test.
fs::path tmp_dir(const std::string& name) {
  fs::path p = tmp_root() / name;
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

void write_file(const fs::path& p, const std::vector<uint8_t>& b) {
  std::ofstream f(p, std::ios::binary);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

TEST(Safetensors, DTypeNamesAndSizes) {
  struct {
    StDType t;
    const char* name;
    size_t size;
  } cases[] = {{StDType::kF64, "F64", 8},        {StDType::kF32, "F32", 4},
               {StDType::kF16, "F16", 2},        {StDType::kBF16, "BF16", 2},
               {StDType::kI64, "I64", 8},        {StDType::kI32, "I32", 4},
               {StDType::kI16, "I16", 2},        {StDType::kI8, "I8", 1},
               {StDType::kU8, "U8", 1},          {StDType::kBool, "BOOL", 1},
               {StDType::kF8E4M3, "F8_E4M3", 1}, {StDType::kF8E5M2, "F8_E5M2", 1}};
  for (const auto& c : cases) {
    EXPECT_STREQ(st_dtype_name(c.t), c.name);
    EXPECT_EQ(st_dtype_size(c.t), c.size);
  }
}

// The bytes the Python library writes for save_file({"a": tensor([1., -2.])},
// metadata={"format": "pt"}): "__metadata__" first, compact JSON, padding.
const char kReferenceHeader[] =
    R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";

TEST(Safetensors, ByteLevelReference) {
  std::vector<uint8_t> data = f32_bytes({1.f, -2.f});
  std::vector<uint8_t> bytes = st_bytes(kReferenceHeader, data);
  ASSERT_EQ(std::strlen(kReferenceHeader), 85u);
  ASSERT_EQ(bytes.size(), 8u + 88u + 8u);  // three spaces of padding
  EXPECT_EQ(bytes[0], 88);
  EXPECT_EQ(std::string(bytes.begin() + 8 + 85, bytes.begin() + 96), "   ");

  auto f = parse(bytes);
  EXPECT_EQ(f->name(), "t.safetensors");
  EXPECT_EQ(f->file_size(), bytes.size());
  EXPECT_EQ(f->data_offset(), 96u);
  ASSERT_EQ(f->metadata().size(), 1u);
  EXPECT_EQ(f->metadata()[0].first, "format");
  EXPECT_EQ(f->metadata()[0].second, "pt");
  ASSERT_EQ(f->tensors().size(), 1u);
  const SafetensorsTensor& a = f->tensors()[0];
  EXPECT_EQ(a.name, "a");
  EXPECT_EQ(a.dtype, StDType::kF32);
  EXPECT_EQ(a.shape, std::vector<int64_t>{2});
  EXPECT_EQ(a.n_elements(), 2);
  EXPECT_EQ(a.offset, 96u);
  EXPECT_EQ(a.nbytes, 8u);
  EXPECT_EQ(f->find("a"), &a);
  EXPECT_EQ(f->find("b"), nullptr);
  float v[2];
  std::memcpy(v, f->data(a), 8);
  EXPECT_EQ(v[0], 1.f);
  EXPECT_EQ(v[1], -2.f);

  SafetensorsWriter w;
  w.set_metadata("format", "pt");
  w.add("a", StDType::kF32, {2}, data);
  EXPECT_EQ(w.to_bytes(), bytes);
  EXPECT_EQ(w.header(), std::vector<uint8_t>(bytes.begin(), bytes.begin() + 96));

  // Readers take the keys in any order: metadata last, as older writers put it.
  auto g = parse(st_bytes(
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"__metadata__":{"format":"pt"}})",
      data));
  ASSERT_EQ(g->tensors().size(), 1u);
  EXPECT_EQ(g->tensors()[0].offset, 96u);
  EXPECT_EQ(g->tensors()[0].shape, a.shape);
  EXPECT_EQ(g->metadata(), f->metadata());
}

// Two files from the official library's own tests: no padding needed, and an
// empty file (an empty object and six spaces).
TEST(Safetensors, OfficialLibraryVectors) {
  const char kAttn[] = R"({"attn.0":{"dtype":"F32","shape":[1,2,3],"data_offsets":[0,24]}})";
  std::vector<uint8_t> data = f32_bytes({0, 1, 2, 3, 4, 5});
  std::vector<uint8_t> bytes = st_bytes(kAttn, data);
  EXPECT_EQ(bytes[0], 64);
  SafetensorsWriter w;
  w.add("attn.0", StDType::kF32, {1, 2, 3}, data);
  EXPECT_EQ(w.to_bytes(), bytes);
  EXPECT_EQ(parse(bytes)->tensors()[0].n_elements(), 6);

  std::vector<uint8_t> empty = {8, 0, 0, 0, 0, 0, 0, 0, '{', '}', ' ', ' ', ' ', ' ', ' ', ' '};
  EXPECT_EQ(SafetensorsWriter().to_bytes(), empty);
  auto f = parse(empty);
  EXPECT_TRUE(f->tensors().empty());
  EXPECT_TRUE(f->metadata().empty());

  SafetensorsWriter m;
  m.set_metadata("framework", "pt");
  std::vector<uint8_t> mb = m.to_bytes();
  EXPECT_EQ(mb[0], 40);
  EXPECT_EQ(std::string(mb.begin() + 8, mb.end()),
            "{\"__metadata__\":{\"framework\":\"pt\"}}     ");
}

SafetensorsWriter every_dtype_writer() {
  SafetensorsWriter w;
  w.set_metadata("format", "pt");
  w.set_metadata("note", "x");
  w.set_metadata("format", "np");  // replaced in place
  const StDType all[] = {StDType::kF64, StDType::kF32,  StDType::kF16,    StDType::kBF16,
                         StDType::kI64, StDType::kI32,  StDType::kI16,    StDType::kI8,
                         StDType::kU8,  StDType::kBool, StDType::kF8E4M3, StDType::kF8E5M2};
  int i = 0;
  for (StDType t : all) {
    std::vector<int64_t> shape = {3, i % 3 + 1};
    w.add(std::string("model.t") + std::to_string(i) + "." + st_dtype_name(t), t, shape,
          pattern(3 * (i % 3 + 1) * st_dtype_size(t), static_cast<uint8_t>(i)));
    ++i;
  }
  w.add("scalar", StDType::kF32, {}, f32_bytes({7.f}));
  w.add("empty", StDType::kBF16, {0, 5}, {});
  w.add("model.layers.0.mlp.experts.gate_up_proj", StDType::kBF16, {2, 3, 4}, pattern(48, 9));
  w.add("name with \"quotes\", \\ and ünïcode\n", StDType::kU8, {1}, {42});
  return w;
}

TEST(Safetensors, WriterRoundTrip) {
  SafetensorsWriter w = every_dtype_writer();
  std::vector<uint8_t> bytes = w.to_bytes();
  EXPECT_EQ(w.header().size() % 8, 0u);
  auto f = parse(bytes);
  ASSERT_EQ(f->tensors().size(), w.n_tensors());
  EXPECT_EQ(f->metadata(),
            (std::vector<std::pair<std::string, std::string>>{{"format", "np"}, {"note", "x"}}));
  // In insertion order, which is offset order; contiguous.
  uint64_t at = f->data_offset();
  for (const SafetensorsTensor& t : f->tensors()) {
    EXPECT_EQ(t.offset, at) << t.name;
    EXPECT_EQ(t.nbytes, static_cast<uint64_t>(t.n_elements()) * st_dtype_size(t.dtype));
    EXPECT_EQ(f->find(t.name), &t);
    at += t.nbytes;
  }
  EXPECT_EQ(at, bytes.size());
  const SafetensorsTensor* t3 = f->find("model.t3.BF16");
  ASSERT_NE(t3, nullptr);
  EXPECT_EQ(t3->dtype, StDType::kBF16);
  EXPECT_EQ(t3->shape, (std::vector<int64_t>{3, 1}));
  EXPECT_EQ(std::vector<uint8_t>(f->data(*t3), f->data(*t3) + 6), pattern(6, 3));
  const SafetensorsTensor* s = f->find("scalar");
  ASSERT_NE(s, nullptr);
  EXPECT_TRUE(s->shape.empty());
  EXPECT_EQ(s->n_elements(), 1);
  EXPECT_EQ(f->find("empty")->nbytes, 0u);
  EXPECT_EQ(f->find("empty")->n_elements(), 0);
  const SafetensorsTensor* odd = f->find("name with \"quotes\", \\ and ünïcode\n");
  ASSERT_NE(odd, nullptr);
  EXPECT_EQ(*f->data(*odd), 42);

  // Through a file: the same table, prefixed with the path in errors.
  fs::path p = tmp_dir("round_trip") / "model.safetensors";
  w.write(p.string());
  EXPECT_FALSE(fs::exists(p.string() + ".tmp"));
  auto g = SafetensorsFile::open(p.string());
  EXPECT_EQ(g->name(), p.string());
  EXPECT_EQ(g->file_size(), bytes.size());
  ASSERT_EQ(g->tensors().size(), f->tensors().size());
  for (size_t i = 0; i < f->tensors().size(); ++i) {
    const SafetensorsTensor &a = f->tensors()[i], &b = g->tensors()[i];
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.offset, b.offset);
    EXPECT_EQ(0, std::memcmp(f->data(a), g->data(b), a.nbytes));
  }
}

TEST(Safetensors, TensorsComeInOffsetOrder) {
  // Header order differs from data order; zero-byte tensors sit anywhere.
  auto f = parse(st_bytes(R"({"z":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},)"
                          R"("b":{"dtype":"I16","shape":[2],"data_offsets":[2,6]},)"
                          R"("a":{"dtype":"I8","shape":[0],"data_offsets":[2,2]},)"
                          R"("e":{"dtype":"BOOL","shape":[2,0],"data_offsets":[6,6]}})",
                          pattern(6, 0)));
  ASSERT_EQ(f->tensors().size(), 4u);
  EXPECT_EQ(f->tensors()[0].name, "z");
  EXPECT_EQ(f->tensors()[1].name, "a");
  EXPECT_EQ(f->tensors()[2].name, "b");
  EXPECT_EQ(f->tensors()[3].name, "e");
}

TEST(Safetensors, UnknownFieldsOfATensorAreIgnored) {
  // As the official reader does; no known writer adds any.
  auto f = parse(st_bytes(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"x":[1]}})", {5}));
  EXPECT_EQ(f->tensors().size(), 1u);
}

TEST(SafetensorsHostile, HeaderLength) {
  EXPECT_TRUE(ParseFailsWith({}, {"0 bytes", "too short"}));
  EXPECT_TRUE(ParseFailsWith({2, 0, 0, 0, 0, 0, 0}, {"7 bytes", "too short"}));
  EXPECT_TRUE(ParseFailsWith(st_bytes("{", {}, false), {"header length 1", "too short"}));
  EXPECT_TRUE(ParseFailsWith(st_bytes("", {}, false), {"header length 0"}));
  std::vector<uint8_t> b = st_bytes("{}");
  uint64_t big = 100'000'001;
  std::memcpy(b.data(), &big, 8);
  EXPECT_TRUE(ParseFailsWith(b, {"header length 100000001", "over the 100000000-byte limit"}));
  big = ~uint64_t{0};
  std::memcpy(b.data(), &big, 8);
  EXPECT_TRUE(ParseFailsWith(b, {"18446744073709551615", "limit"}));
  big = 9;
  std::memcpy(b.data(), &big, 8);
  EXPECT_TRUE(ParseFailsWith(b, {"header length 9 runs past the end of the file (16 bytes)"}));
}

TEST(SafetensorsHostile, HeaderIsNotAJsonObject) {
  EXPECT_TRUE(ParseFailsWith(st_bytes("[]"), {"does not start with '{'", "0x5b"}));
  EXPECT_TRUE(ParseFailsWith(st_bytes("  {}"), {"does not start with '{'", "0x20"}));
  EXPECT_TRUE(ParseFailsWith(st_bytes("{\"a\":"), {"header: malformed JSON at byte"}));
  EXPECT_TRUE(ParseFailsWith(st_bytes("{} x"), {"header: malformed JSON at byte 4"}));
  EXPECT_TRUE(ParseFailsWith(st_bytes(std::string("{}\0\0\0\0\0\0", 8), {}, false),
                             {"malformed JSON at byte 3: a NUL byte"}));
  EXPECT_TRUE(ParseFailsWith(st_bytes(std::string("{\"a\0\":1}", 9)), {"at byte 4: a NUL byte"}));
  EXPECT_TRUE(ParseFailsWith(st_bytes("{\"\xff\":1}"), {"malformed JSON", "UTF-8"}));
  EXPECT_TRUE(ParseFailsWith(st_bytes("{\"a\":{\"shape\":[[[1]]]}}"), {"nested deeper than 3"}));
}

TEST(SafetensorsHostile, DuplicateKeys) {
  const char* t = R"({"dtype":"U8","shape":[1],"data_offsets":[0,1]})";
  EXPECT_TRUE(ParseFailsWith(st_bytes(std::string("{\"a\":") + t + ",\"a\":" + t + "}", {1, 2}),
                             {"header: key \"a\" appears twice"}));
  EXPECT_TRUE(ParseFailsWith(
      st_bytes(R"({"a":{"dtype":"U8","dtype":"I8","shape":[1],"data_offsets":[0,1]}})", {1}),
      {"key \"dtype\" appears twice in \"a\""}));
  EXPECT_TRUE(ParseFailsWith(st_bytes(R"({"__metadata__":{"k":"1","k":"2"}})"),
                             {"key \"k\" appears twice in \"__metadata__\""}));
  EXPECT_TRUE(ParseFailsWith(st_bytes(R"({"__metadata__":{},"__metadata__":{}})"),
                             {"key \"__metadata__\" appears twice"}));
}

TEST(SafetensorsHostile, TensorEntry) {
  EXPECT_TRUE(EntryFailsWith("[1]", {"tensor a: expected an object", "[1]"}));
  EXPECT_TRUE(EntryFailsWith(R"({"shape":[2],"data_offsets":[0,8]})", {"tensor a: no \"dtype\""}));
  EXPECT_TRUE(
      EntryFailsWith(R"({"dtype":"F32","data_offsets":[0,8]})", {"tensor a: no \"shape\""}));
  EXPECT_TRUE(EntryFailsWith(R"({"dtype":"F32","shape":[2]})", {"tensor a: no \"data_offsets\""}));
  EXPECT_TRUE(EntryFailsWith(R"({"dtype":4,"shape":[2],"data_offsets":[0,8]})",
                             {"tensor a: dtype is 4, not a string"}));
  for (const char* d : {"F4", "U16", "U64", "f32", "F8_E8M0", ""})
    EXPECT_TRUE(
        EntryFailsWith(std::string(R"({"dtype":")") + d + R"(","shape":[2],"data_offsets":[0,8]})",
                       {std::string("tensor a: unknown dtype \"") + d + "\""}));
}

TEST(SafetensorsHostile, Shape) {
  auto entry = [](const std::string& shape) {
    return R"({"dtype":"U8","shape":)" + shape + R"(,"data_offsets":[0,8]})";
  };
  EXPECT_TRUE(EntryFailsWith(entry("8"), {"tensor a: shape is 8, not an array"}));
  EXPECT_TRUE(EntryFailsWith(entry("[2,-4]"), {"tensor a: shape[1] is -4, negative"}));
  EXPECT_TRUE(
      EntryFailsWith(entry("[8.0]"), {"tensor a: shape[0] is 8.0, not a non-negative integer"}));
  EXPECT_TRUE(EntryFailsWith(entry("[8e0]"), {"shape[0] is 8.0, not a non-negative integer"}));
  EXPECT_TRUE(EntryFailsWith(entry("[\"8\"]"), {"shape[0] is \"8\", not a non-negative integer"}));
  EXPECT_TRUE(EntryFailsWith(entry("[null]"), {"shape[0] is null"}));
  EXPECT_TRUE(EntryFailsWith(entry("[9223372036854775808]"),
                             {"shape[0] is 9223372036854775808, more than 9223372036854775807"}));
  EXPECT_TRUE(
      EntryFailsWith(entry("[18446744073709551616]"), {"shape[0]", "not a non-negative integer"}));
  EXPECT_TRUE(
      EntryFailsWith(entry("[4294967296,4294967296]"),
                     {"shape [4294967296, 4294967296] has more elements than an int64 holds"}));
  // A zero after the overflow does not hide it.
  EXPECT_TRUE(EntryFailsWith(entry("[4294967296,4294967296,0]"), {"more elements than an int64"}));
  EXPECT_TRUE(ParseFailsWith(
      st_bytes(R"({"a":{"dtype":"F64","shape":[2305843009213693952],"data_offsets":[0,8]}})",
               pattern(8, 0)),
      {"tensor a: shape [2305843009213693952] of F64 is more bytes than a uint64 holds"}));
}

TEST(SafetensorsHostile, DataOffsets) {
  auto entry = [](const std::string& offsets) {
    return R"({"dtype":"F32","shape":[2],"data_offsets":)" + offsets + "}";
  };
  EXPECT_TRUE(EntryFailsWith(entry("[0]"), {"tensor a: data_offsets is [0], not [begin, end]"}));
  EXPECT_TRUE(EntryFailsWith(entry("[0,8,8]"), {"not [begin, end]"}));
  EXPECT_TRUE(EntryFailsWith(entry("{}"), {"not [begin, end]"}));
  EXPECT_TRUE(EntryFailsWith(entry("[-8,0]"), {"tensor a: data_offsets[0] is -8, negative"}));
  EXPECT_TRUE(
      EntryFailsWith(entry("[0,8.5]"), {"data_offsets[1] is 8.5, not a non-negative integer"}));
  EXPECT_TRUE(EntryFailsWith(entry("[8,0]"), {"tensor a: data_offsets [8, 0) end before begin"}));
  EXPECT_TRUE(EntryFailsWith(
      entry("[8,16]"), {"tensor a: data_offsets [8, 16) end past the data section (8 bytes)"}));
  EXPECT_TRUE(EntryFailsWith(entry("[0,18446744073709551615]"), {"end past the data section"}));
  EXPECT_TRUE(
      EntryFailsWith(R"({"dtype":"F32","shape":[1],"data_offsets":[0,8]})",
                     {"tensor a: data_offsets [0, 8) hold 8 bytes; shape [1] of F32 is 4"}));
}

TEST(SafetensorsHostile, TensorsMustTileTheDataSection) {
  auto two = [](const std::string& a, const std::string& b, size_t data) {
    return st_bytes(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":)" + a +
                        R"(},"b":{"dtype":"F32","shape":[1],"data_offsets":)" + b + "}}",
                    pattern(data, 0));
  };
  EXPECT_TRUE(
      ParseFailsWith(two("[0,4]", "[0,4]", 4), {"tensor b: data_offsets [0, 4) overlap tensor a"}));
  EXPECT_TRUE(
      ParseFailsWith(two("[0,4]", "[2,6]", 6), {"tensor b: data_offsets [2, 6) overlap tensor a"}));
  EXPECT_TRUE(ParseFailsWith(
      two("[0,4]", "[6,10]", 10),
      {"tensor b: data_offsets [6, 10) not contiguous", "hole of 2 bytes after tensor a"}));
  EXPECT_TRUE(
      ParseFailsWith(two("[4,8]", "[8,12]", 12),
                     {"tensor a: data_offsets [4, 8) not contiguous", "does not begin at 0"}));
  EXPECT_TRUE(ParseFailsWith(two("[0,4]", "[4,8]", 9),
                             {"not contiguous: 1 bytes after the last tensor b"}));
  EXPECT_TRUE(ParseFailsWith(st_bytes("{}", {1, 2, 3}),
                             {"not contiguous: no tensors, but the data section has 3 bytes"}));
}

TEST(SafetensorsHostile, Metadata) {
  EXPECT_TRUE(ParseFailsWith(st_bytes(R"({"__metadata__":["a"]})"),
                             {"__metadata__ is [\"a\"], not an object of strings"}));
  EXPECT_TRUE(ParseFailsWith(st_bytes(R"({"__metadata__":{"format":1}})"),
                             {"__metadata__ key format is 1, not a string"}));
  EXPECT_TRUE(ParseFailsWith(st_bytes(R"({"__metadata__":{"format":{}}})"),
                             {"__metadata__ key format is {}"}));
}

TEST(SafetensorsHostile, NamesInMessagesStayOnOneLine) {
  EXPECT_TRUE(
      ParseFailsWith(st_bytes(R"({"a\nb":{"dtype":"X","shape":[],"data_offsets":[0,1]}})", {1}),
                     {"tensor a\\x0ab: unknown dtype \"X\""}));
  std::string name(1000, 'n');
  EXPECT_TRUE(ParseFailsWith(
      st_bytes("{\"" + name + R"(":{"dtype":"X","shape":[],"data_offsets":[0,1]}})", {1}),
      {"...(1000 bytes): unknown dtype"}));
}

TEST(SafetensorsHostile, EveryTruncationFails) {
  SafetensorsWriter w;
  w.set_metadata("format", "pt");
  w.add("a", StDType::kF16, {3}, pattern(6, 1));
  w.add("b", StDType::kI32, {2}, pattern(8, 2));
  std::vector<uint8_t> bytes = w.to_bytes();
  ASSERT_NO_THROW(parse(bytes));
  for (size_t n = 0; n < bytes.size(); ++n) {
    // A copy of exactly n bytes, so a sanitizer build sees any read past it.
    std::vector<uint8_t> prefix(bytes.begin(), bytes.begin() + n);
    EXPECT_TRUE(ParseFailsWith(prefix, {})) << "length " << n;
  }
}

TEST(SafetensorsHostile, OpenNamesThePath) {
  fs::path dir = tmp_dir("open");
  EXPECT_TRUE(ThrowsErrorWith([&] { SafetensorsFile::open((dir / "none.safetensors").string()); },
                              {"none.safetensors: cannot open"}));
  write_file(dir / "bad.safetensors", st_bytes("{\"a\":1}"));
  EXPECT_TRUE(
      ThrowsErrorWith([&] { SafetensorsFile::open((dir / "bad.safetensors").string()); },
                      {(dir / "bad.safetensors").string() + ": tensor a: expected an object"}));
}

TEST(SafetensorsWriter, RefusesBadTensors) {
  SafetensorsWriter w;
  w.add("a", StDType::kF32, {2}, pattern(8, 0));
  EXPECT_TRUE(ThrowsErrorWith([&] { w.add("a", StDType::kF32, {2}, pattern(8, 0)); },
                              {"tensor a added twice"}));
  EXPECT_TRUE(ThrowsErrorWith(
      [&] {
        w.add("b", StDType::kF32, {2, -1}, {});
      },
      {"tensor b: dimension 1 is -1"}));
  EXPECT_TRUE(ThrowsErrorWith([&] { w.add("c", StDType::kF32, {3}, pattern(8, 0)); },
                              {"tensor c: expected 3 elements of F32, got 8 bytes"}));
  EXPECT_TRUE(ThrowsErrorWith(
      [&] {
        w.add("d", StDType::kU8, {1ll << 40, 1ll << 40}, {});
      },
      {"tensor d: element count overflows"}));
  EXPECT_TRUE(ThrowsErrorWith([&] { w.add("__metadata__", StDType::kU8, {}, {1}); },
                              {"__metadata__ is not a tensor name"}));
  w.add("\xff", StDType::kU8, {}, {1});
  EXPECT_TRUE(ThrowsErrorWith([&] { w.to_bytes(); }, {"not valid UTF-8"}));
  EXPECT_EQ(w.n_tensors(), 2u);
}

// --- SafetensorsSet ---

// Two shards: a and b.0 in the first, b.1 in the second.
void write_two_shards(const fs::path& dir) {
  SafetensorsWriter s1, s2;
  s1.add("a", StDType::kF32, {2}, pattern(8, 1));
  s1.add("b.0", StDType::kBF16, {2, 2}, pattern(8, 2));
  s2.add("b.1", StDType::kBF16, {2, 2}, pattern(8, 3));
  s1.write((dir / "model-00001-of-00002.safetensors").string());
  s2.write((dir / "model-00002-of-00002.safetensors").string());
}

const std::vector<std::pair<std::string, std::string>> kGoodMap = {
    {"b.1", "model-00002-of-00002.safetensors"},
    {"a", "model-00001-of-00002.safetensors"},
    {"b.0", "model-00001-of-00002.safetensors"}};

fs::path sharded_dir(const std::string& name,
                     const std::vector<std::pair<std::string, std::string>>& map = kGoodMap) {
  fs::path dir = tmp_dir(name);
  write_two_shards(dir);
  write_safetensors_index((dir / "model.safetensors.index.json").string(), map);
  return dir;
}

testing::AssertionResult OpenDirFailsWith(const fs::path& dir,
                                          const std::vector<std::string>& parts) {
  return ThrowsErrorWith([&] { SafetensorsSet::open_dir(dir.string()); }, parts);
}

TEST(SafetensorsSet, SingleFile) {
  fs::path dir = tmp_dir("single");
  every_dtype_writer().write((dir / "model.safetensors").string());
  auto set = SafetensorsSet::open_dir(dir.string());
  ASSERT_EQ(set->files().size(), 1u);
  EXPECT_EQ(set->names().size(), every_dtype_writer().n_tensors());
  EXPECT_TRUE(std::is_sorted(set->names().begin(), set->names().end()));
  const SafetensorsSet::Entry* e = set->find("scalar");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->file, set->files()[0].get());
  EXPECT_EQ(e->tensor->name, "scalar");
  EXPECT_EQ(set->find("nope"), nullptr);
}

TEST(SafetensorsSet, TwoShards) {
  fs::path dir = sharded_dir("two_shards");
  std::ifstream in(dir / "model.safetensors.index.json");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text,
            "{\n  \"metadata\": {},\n  \"weight_map\": {\n"
            "    \"a\": \"model-00001-of-00002.safetensors\",\n"
            "    \"b.0\": \"model-00001-of-00002.safetensors\",\n"
            "    \"b.1\": \"model-00002-of-00002.safetensors\"\n  }\n}\n");

  auto set = SafetensorsSet::open_dir(dir.string());
  ASSERT_EQ(set->files().size(), 2u);
  EXPECT_EQ(set->names(), (std::vector<std::string>{"a", "b.0", "b.1"}));
  const SafetensorsSet::Entry* e = set->find("b.1");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->file, set->files()[1].get());
  EXPECT_EQ(e->tensor->shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(std::vector<uint8_t>(e->file->data(*e->tensor), e->file->data(*e->tensor) + 8),
            pattern(8, 3));
  EXPECT_EQ(set->find("a")->file, set->files()[0].get());
}

TEST(SafetensorsSet, EmptyOrMissingFolder) {
  fs::path dir = tmp_dir("empty");
  EXPECT_TRUE(OpenDirFailsWith(dir, {dir.string() + ": has no model.safetensors or "
                                                    "model.safetensors.index.json"}));
  EXPECT_TRUE(OpenDirFailsWith(dir / "nope", {"nope: not a directory"}));
}

TEST(SafetensorsSet, IndexDisagreesWithShards) {
  auto map = kGoodMap;
  map[1].second = "model-00002-of-00002.safetensors";  // a is really in shard 1
  EXPECT_TRUE(OpenDirFailsWith(sharded_dir("wrong_shard", map),
                               {"model.safetensors.index.json: tensor a: the index says shard "
                                "model-00002-of-00002.safetensors, but it is in",
                                "model-00001-of-00002.safetensors"}));

  map = kGoodMap;
  map.push_back({"c", "model-00002-of-00002.safetensors"});
  EXPECT_TRUE(OpenDirFailsWith(sharded_dir("listed_missing", map),
                               {"index.json: tensor c is in no shard (the index says "
                                "model-00002-of-00002.safetensors)"}));

  // A tensor of a listed shard that the index leaves out.
  map = kGoodMap;
  map.pop_back();  // b.0
  EXPECT_TRUE(
      OpenDirFailsWith(sharded_dir("unlisted", map),
                       {"model-00001-of-00002.safetensors: tensor b.0 is not in the index"}));

  // The same tensor in both shards.
  fs::path dir = sharded_dir("twice");
  SafetensorsWriter s2;
  s2.add("b.1", StDType::kBF16, {2, 2}, pattern(8, 3));
  s2.add("a", StDType::kF32, {2}, pattern(8, 1));
  s2.write((dir / "model-00002-of-00002.safetensors").string());
  EXPECT_TRUE(OpenDirFailsWith(dir, {"model-00002-of-00002.safetensors: tensor a is also in",
                                     "model-00001-of-00002.safetensors"}));
}

TEST(SafetensorsSet, BadShardNames) {
  auto map = kGoodMap;
  map[0].second = "model-00003-of-00002.safetensors";
  EXPECT_TRUE(OpenDirFailsWith(
      sharded_dir("missing_shard", map),
      {"index.json: shard model-00003-of-00002.safetensors is not in the folder"}));
  for (const char* bad : {"../x", "..", ".", "", "sub/model.safetensors", "/etc/passwd"}) {
    map = kGoodMap;
    map[0].second = bad;
    EXPECT_TRUE(OpenDirFailsWith(sharded_dir("bad_name", map),
                                 {"index.json: tensor b.1: shard \"" + std::string(bad) +
                                  "\" is not a plain file name in the folder"}));
  }
}

TEST(SafetensorsSet, MalformedIndex) {
  fs::path dir = sharded_dir("malformed");
  fs::path index = dir / "model.safetensors.index.json";
  auto fails = [&](const std::string& text, const std::vector<std::string>& parts) {
    std::vector<uint8_t> b(text.begin(), text.end());
    write_file(index, b);
    std::vector<std::string> all = parts;
    all.insert(all.begin(), index.string() + ": ");
    return OpenDirFailsWith(dir, all);
  };
  EXPECT_TRUE(fails("", {"file is empty"}));
  EXPECT_TRUE(fails("{\"weight_map\": {", {"malformed JSON at byte"}));
  EXPECT_TRUE(fails("[]", {"expected a JSON object, found array"}));
  EXPECT_TRUE(fails("{\"metadata\": {}}", {"no \"weight_map\""}));
  EXPECT_TRUE(fails("{\"weight_map\": []}", {"weight_map is [], not an object"}));
  EXPECT_TRUE(fails("{\"weight_map\": {\"a\": 1}}", {"tensor a: shard is 1, not a file name"}));
  EXPECT_TRUE(fails(R"({"weight_map": {"a": "x", "a": "y"}})",
                    {"key \"a\" appears twice in \"weight_map\""}));
  EXPECT_TRUE(fails(R"({"weight_map": {"a": "x\u0000y"}})", {"is not a plain file name"}));
  EXPECT_TRUE(ThrowsErrorWith(
      [&] {
        write_safetensors_index(index.string(), {{"a", "x"}, {"a", "y"}});
      },
      {"tensor a is in the weight map twice"}));
}

}  // namespace
}  // namespace colibri
