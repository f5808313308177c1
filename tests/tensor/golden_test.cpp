// Every tensor of every golden model (../shared/golden/*.gguf, written by
// llama.cpp's tools) dequantizes to finite values; F16/BF16 tensors equal the
// bit-exact conversion of each element.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

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

}  // namespace
}  // namespace colibri
