// Writes the safetensors fuzzer's seed corpus (tests/fuzz/safetensors_corpus):
// valid files that between them use every dtype, a scalar, a zero-size tensor,
// metadata and header orders the writer does not produce, and one file a hole
// away from valid. Usage: fuzz_safetensors_seeds <dir>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "base/error.h"
#include "formats/safetensors_writer.h"

namespace colibri {
namespace {

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(seed * 7 + i * 13);
  return b;
}

// A file with a header written by hand: length, header padded to 8, data.
std::vector<uint8_t> raw(std::string header, size_t data_bytes) {
  header.append((8 - header.size() % 8) % 8, ' ');
  std::vector<uint8_t> data = pattern(data_bytes, 3);
  std::vector<uint8_t> out(8 + header.size() + data.size());
  uint64_t n = header.size();
  std::memcpy(out.data(), &n, 8);
  std::memcpy(out.data() + 8, header.data(), header.size());
  std::memcpy(out.data() + 8 + header.size(), data.data(), data.size());
  return out;
}

std::vector<uint8_t> reference() {
  SafetensorsWriter w;
  w.set_metadata("format", "pt");
  w.add("a", StDType::kF32, {2}, pattern(8, 1));
  return w.to_bytes();
}

std::vector<uint8_t> every_dtype() {
  SafetensorsWriter w;
  const StDType all[] = {StDType::kF64, StDType::kF32,  StDType::kF16,    StDType::kBF16,
                         StDType::kI64, StDType::kI32,  StDType::kI16,    StDType::kI8,
                         StDType::kU8,  StDType::kBool, StDType::kF8E4M3, StDType::kF8E5M2};
  uint8_t seed = 0;
  for (StDType t : all) {
    std::vector<int64_t> shape = {2};
    for (int d = 0; d < seed % 3; ++d) shape.push_back(2);
    size_t n = st_dtype_size(t) << shape.size();
    w.add(std::string("model.layers.0.") + st_dtype_name(t), t, shape, pattern(n, seed++));
  }
  w.add("scalar", StDType::kF32, {}, pattern(4, 20));
  w.add("empty", StDType::kBF16, {0, 4}, {});
  return w.to_bytes();
}

void save(const std::vector<uint8_t>& b, const std::string& dir, const std::string& name) {
  std::string path = dir + "/" + name;
  std::FILE* f = std::fopen(path.c_str(), "wb");
  CLB_CHECK(f && std::fwrite(b.data(), 1, b.size(), f) == b.size() && std::fclose(f) == 0,
            "%s: cannot write", path.c_str());
  std::printf("%s: %zu bytes\n", path.c_str(), b.size());
}

}  // namespace
}  // namespace colibri

int main(int argc, char** argv) {
  using namespace colibri;
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <corpus dir>\n", argv[0]);
    return 2;
  }
  try {
    std::string dir = argv[1];
    save(SafetensorsWriter().to_bytes(), dir, "seed-empty.safetensors");
    save(reference(), dir, "seed-reference.safetensors");
    save(every_dtype(), dir, "seed-dtypes.safetensors");
    // Header order unlike data order, metadata last, an unknown field.
    save(raw(R"({"b":{"dtype":"I16","shape":[2,1],"data_offsets":[2,6]},)"
             R"("a":{"dtype":"U8","shape":[2],"data_offsets":[0,2],"x":0},)"
             R"("__metadata__":{"format":"np","k":"v"}})",
             6),
         dir, "seed-unordered.safetensors");
    // Near valid: a 2-byte hole between the tensors.
    save(raw(R"({"a":{"dtype":"F16","shape":[1],"data_offsets":[0,2]},)"
             R"("b":{"dtype":"F16","shape":[1],"data_offsets":[4,6]}})",
             6),
         dir, "seed-hole.safetensors");
  } catch (const Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
