// Every tensor of every golden model (../shared/golden/*.gguf, written by
// llama.cpp's tools) dequantizes to finite values; F16/BF16 tensors equal the
// bit-exact conversion of each element. The models of tests/data/golden
// (IQ4_NL, IQ4_XS) dequantize to llama.cpp's own values, bit for bit, and
// quantizing their float sources here writes llama-quantize's bytes.
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "formats/gguf.h"
#include "tensor/half.h"
#include "tensor/ops.h"

namespace colibri {
namespace {

namespace fs = std::filesystem;

std::vector<fs::path> golden_models() {
  std::vector<fs::path> v;
  const fs::path dir = fs::path(COLIBRI_SHARED_DIR) / "golden";
  if (!fs::is_directory(dir)) return v;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".gguf") v.push_back(e.path());
  std::sort(v.begin(), v.end());
  return v;
}

TEST(Golden, EveryTensorDequantizes) {
  const auto models = golden_models();
  if (models.empty()) GTEST_SKIP() << "no golden models under " << COLIBRI_SHARED_DIR << "/golden";
  std::vector<float> row;
  int n_quant = 0;
  for (const fs::path& p : models) {
    const auto file = GgufFile::open(p.string());
    for (const GgufTensor& t : file->tensors()) {
      const TensorView v = file->view(t);
      const int64_t n = v.ne[0];
      row.resize(n);
      const bool half = t.type == DType::F16 || t.type == DType::BF16;
      n_quant += dtype_info(t.type).block_size > 1;
      for (int64_t r = 0; r < v.n_rows(); ++r) {
        dequantize_row(t.type, v.row(r), row.data(), n);
        const auto* h = reinterpret_cast<const uint16_t*>(v.row(r));
        for (int64_t i = 0; i < n; ++i) {
          ASSERT_TRUE(std::isfinite(row[i])) << p.filename() << " " << t.name << " row " << r << " col " << i;
          if (half) {
            // Compared by bits, from the element's own 16 bits.
            const uint32_t want = t.type == DType::F16 ? f32_bits(half_to_float(h[i]))
                                                       : static_cast<uint32_t>(h[i]) << 16;
            ASSERT_EQ(f32_bits(row[i]), want) << p.filename() << " " << t.name;
          }
        }
      }
    }
  }
  EXPECT_GT(n_quant, 0);
}

// FNV-1a (64-bit) of a float array's bytes, as make_golden.sh hashes
// llama.cpp's dequantized tensors.
uint64_t fnv1a64(const float* v, size_t n, uint64_t h) {
  const auto* b = reinterpret_cast<const unsigned char*>(v);
  for (size_t i = 0; i < n * sizeof(float); ++i) h = (h ^ b[i]) * 0x100000001b3ULL;
  return h;
}

// tests/data/golden/NAME.dequant-f32.fnv.json holds, per tensor of NAME.gguf,
// the hash of the F32 values llama-quantize wrote when it dequantized the file
// (make_golden.sh): every tensor, whatever its type, must dequantize to those
// bits here, so a nibble order, a scale's bit field, the IQ4 value table or a
// codebook point that differed from llama.cpp's in a single element fails.
TEST(Golden, RepoModelsDequantizeToLlamaCppsBits) {
  const fs::path dir = fs::path(COLIBRI_SOURCE_DIR) / "tests/data/golden";
  std::vector<fs::path> refs;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().string().ends_with(".dequant-f32.fnv.json")) refs.push_back(e.path());
  std::sort(refs.begin(), refs.end());
  ASSERT_EQ(refs.size(), 5u);
  std::set<std::string> types;
  for (const fs::path& ref : refs) {
    std::ifstream in(ref);
    const nlohmann::json j = nlohmann::json::parse(in);
    const std::string name = ref.filename().string();
    const auto file = GgufFile::open((dir / (name.substr(0, name.find('.')) + ".gguf")).string());
    EXPECT_EQ(file->tensors().size(), j["tensors"].size()) << name;
    std::vector<float> row;
    for (const GgufTensor& t : file->tensors()) {
      ASSERT_TRUE(j["tensors"].contains(t.name)) << name << " " << t.name;
      const auto& want = j["tensors"][t.name];
      std::string type = dtype_name(t.type);  // "q6_K"; gguf-py writes "q6_k"
      for (char& c : type) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      EXPECT_EQ(want["type"].get<std::string>(), type) << t.name;
      const TensorView v = file->view(t);
      row.resize(static_cast<size_t>(v.ne[0]));
      uint64_t h = 0xcbf29ce484222325ULL;
      for (int64_t r = 0; r < v.n_rows(); ++r) {
        dequantize_row(t.type, v.row(r), row.data(), v.ne[0]);
        h = fnv1a64(row.data(), row.size(), h);
      }
      char hex[17];
      std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
      EXPECT_EQ(hex, want["fnv1a64"].get<std::string>())
          << name << " " << t.name << " (" << dtype_name(t.type) << ")";
      types.insert(dtype_name(t.type));
    }
  }
  for (const char* t : {"iq4_nl", "iq4_xs", "iq1_s", "iq1_m", "iq2_xxs", "iq2_xs", "iq2_s", "iq3_xxs", "iq3_s"})
    EXPECT_TRUE(types.count(t)) << t;
}

// Quantizes every tensor of `quant` of a type in `types` from the same tensor
// of `src` (dequantized to F32) and counts the rows whose bytes differ from
// the file's; adds the blocks compared to *blocks.
void expect_quantized_bytes(const fs::path& quant_path, const fs::path& src_path,
                            const std::set<DType>& types, std::map<DType, int64_t>* blocks) {
  const auto quant = GgufFile::open(quant_path.string());
  const auto src = GgufFile::open(src_path.string());
  std::vector<float> f;
  std::vector<uint8_t> got;
  for (const GgufTensor& t : quant->tensors()) {
    if (!types.count(t.type)) continue;
    const GgufTensor* s = src->find_tensor(t.name);
    ASSERT_NE(s, nullptr) << quant_path.filename() << " " << t.name;
    const TensorView q = quant->view(t), v = src->view(*s);
    ASSERT_EQ(q.ne[0], v.ne[0]);
    ASSERT_EQ(q.n_rows(), v.n_rows());
    const size_t rb = colibri::row_bytes(t.type, q.ne[0]);
    f.resize(static_cast<size_t>(v.ne[0]));
    got.resize(rb);
    int64_t bad = 0;
    for (int64_t r = 0; r < v.n_rows(); ++r) {
      dequantize_row(s->type, v.row(r), f.data(), v.ne[0]);
      quantize_weights(t.type, f.data(), got.data(), v.ne[0]);
      bad += std::memcmp(got.data(), q.row(r), rb) != 0;
    }
    EXPECT_EQ(bad, 0) << quant_path.filename() << " " << t.name << " (" << dtype_name(t.type)
                      << "): rows differing of " << q.n_rows();
    (*blocks)[t.type] += q.n_rows() * q.ne[0] / dtype_info(t.type).block_size;
  }
}

// make_golden.sh wrote each IQ4 model with llama-quantize (no importance
// matrix) from a float model of shared/golden: every IQ4_NL and IQ4_XS tensor
// quantized here from the same floats must be the same bytes, block for block.
TEST(Golden, Iq4QuantizersWriteLlamaQuantizesBytes) {
  const fs::path shared = fs::path(COLIBRI_SHARED_DIR) / "golden";
  const fs::path repo = fs::path(COLIBRI_SOURCE_DIR) / "tests/data/golden";
  const std::pair<const char*, const char*> pairs[] = {{"qwen3moe-h256-iq4_xs", "qwen3moe-h256-f16"},
                                                       {"deepseek-v3-iq4_nl", "deepseek-v3-f32"}};
  std::map<DType, int64_t> blocks;
  for (const auto& [name, src_name] : pairs) {
    const fs::path src_path = shared / (std::string(src_name) + ".gguf");
    if (!fs::exists(src_path)) GTEST_SKIP() << "no " << src_path;
    expect_quantized_bytes(repo / (std::string(name) + ".gguf"), src_path,
                           {DType::IQ4_NL, DType::IQ4_XS}, &blocks);
  }
  EXPECT_GT(blocks[DType::IQ4_NL], 0);
  EXPECT_GT(blocks[DType::IQ4_XS], 0);
}

// shared/golden's K-quant files of the qwen3moe-h256 model are llama-quantize's
// (no importance matrix) of its F16 file: their Q2_K, Q3_K, Q4_K, Q5_K and
// Q6_K tensors quantized here from those halves must be the same bytes.
TEST(Golden, KQuantizersWriteLlamaQuantizesBytes) {
  const fs::path dir = fs::path(COLIBRI_SHARED_DIR) / "golden";
  const fs::path src = dir / "qwen3moe-h256-f16.gguf";
  if (!fs::exists(src)) GTEST_SKIP() << "no " << src;
  std::map<DType, int64_t> blocks;
  for (const char* name : {"qwen3moe-h256-q4_k_m", "qwen3moe-h256-q5_k_m", "qwen3moe-h256-q6_k",
                           "qwen3moe-h256-q2_k", "qwen3moe-h256-q3_k_m"})
    expect_quantized_bytes(dir / (std::string(name) + ".gguf"), src,
                           {DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K},
                           &blocks);
  EXPECT_GT(blocks[DType::Q2_K], 0);
  EXPECT_GT(blocks[DType::Q3_K], 0);
  EXPECT_GT(blocks[DType::Q4_K], 0);
  EXPECT_GT(blocks[DType::Q5_K], 0);
  EXPECT_GT(blocks[DType::Q6_K], 0);
}

}  // namespace
}  // namespace colibri
