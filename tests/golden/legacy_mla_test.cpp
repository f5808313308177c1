// DeepSeek files from older converters: one attn_kv_b per layer (Hugging
// Face's kv_b_proj) and no key_length_mla / value_length_mla. The golden
// DeepSeek files are rewritten into that layout (attn_k_b transposed back
// into the key rows of attn_kv_b, attn_v_b as its value rows, the cache keys
// as the older converter stated them) and must give the split file's logits.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>

#include "engine/engine.h"
#include "formats/gguf.h"
#include "formats/gguf_writer.h"
#include "tensor/ops.h"

namespace colibri {
namespace {

namespace fs = std::filesystem;
const fs::path kGolden = fs::path(COLIBRI_SHARED_DIR) / "golden";

void write_legacy(const fs::path& in, const fs::path& out) {
  auto f = GgufFile::open(in.string());
  const std::string a(f->require_string("general.architecture"));
  const int64_t H = static_cast<int64_t>(f->require_uint(a + ".attention.head_count"));
  const int64_t R = static_cast<int64_t>(f->require_uint(a + ".attention.kv_lora_rank"));
  const int64_t rope = static_cast<int64_t>(f->require_uint(a + ".rope.dimension_count"));
  const int64_t nope = static_cast<int64_t>(f->require_uint(a + ".attention.key_length_mla")) - rope;
  const int64_t vd = static_cast<int64_t>(f->require_uint(a + ".attention.value_length_mla"));
  GgufWriter w;
  for (const GgufKV& kv : f->metadata()) {
    if (kv.key == "general.alignment" || kv.key.find("_length_mla") != std::string::npos) continue;
    w.set_value(kv.key, kv.value);
  }
  w.set_u32(a + ".attention.key_length", static_cast<uint32_t>(nope + rope));
  w.set_u32(a + ".attention.value_length", static_cast<uint32_t>(vd));
  w.set_u32(a + ".attention.head_count_kv", static_cast<uint32_t>(H));
  for (const GgufTensor& t : f->tensors()) {
    const std::string& n = t.name;
    if (n.find("attn_v_b") != std::string::npos) continue;
    if (n.find("attn_k_b") == std::string::npos) {
      const uint8_t* d = f->tensor_data(t);
      w.add_tensor(n, t.type, std::vector<int64_t>(t.ne, t.ne + t.n_dims), std::vector<uint8_t>(d, d + t.nbytes));
      continue;
    }
    const TensorView kb = f->view(t);
    const TensorView vb = f->view(*f->find_tensor(std::string(n).replace(n.find("attn_k_b"), 8, "attn_v_b")));
    // kv_b (F32): per head, nope rows of R (keys: attn_k_b transposed), then
    // vd rows of R (values: attn_v_b's rows).
    std::vector<float> kv(static_cast<size_t>(H) * (nope + vd) * R), row(std::max(nope, R));
    for (int64_t h = 0; h < H; ++h) {
      for (int64_t r = 0; r < R; ++r) {
        dequantize_matrix_row(kb, h * R + r, row.data());
        for (int64_t i = 0; i < nope; ++i) kv[((h * (nope + vd)) + i) * R + r] = row[i];
      }
      for (int64_t j = 0; j < vd; ++j) dequantize_matrix_row(vb, h * vd + j, &kv[(h * (nope + vd) + nope + j) * R]);
    }
    std::vector<uint8_t> bytes(kv.size() * sizeof(float));
    std::memcpy(bytes.data(), kv.data(), bytes.size());
    w.add_tensor(std::string(n).replace(n.find("attn_k_b"), 8, "attn_kv_b"), DType::F32, {R, H * (nope + vd)},
                 std::move(bytes));
  }
  w.write(out.string());
}

std::vector<float> prompt_logits(const std::string& path) {
  EngineOptions o;
  o.model_path = path;
  o.n_ctx = 128;
  o.n_threads = 2;
  o.kv_type = DType::F32;
  o.store.no_history = true;
  Engine e(o);
  const std::vector<int32_t> prompt = {11, 300, 7, 1024, 99, 5, 17, 64};
  std::vector<float> out;
  const float* l = e.eval_prompt(prompt, 0, 0);
  out.assign(l, l + e.n_vocab());
  for (int s = 0; s < 4; ++s) {
    l = e.eval_token(100 + s, 0, static_cast<int>(prompt.size()) + s);
    out.insert(out.end(), l, l + e.n_vocab());
  }
  return out;
}

TEST(LegacyMla, SingleKvBGivesTheSplitFilesLogits) {
  int n = 0;
  for (const char* m : {"deepseek-v2-lite-f32", "deepseek-v3-f32", "deepseek-v3-q8_0"}) {
    const fs::path src = kGolden / (std::string(m) + ".gguf");
    if (!fs::exists(src)) continue;
    const fs::path legacy = fs::temp_directory_path() / (std::string("colibri-legacy-") + m + ".gguf");
    write_legacy(src, legacy);
    const std::vector<float> want = prompt_logits(src.string()), got = prompt_logits(legacy.string());
    fs::remove(legacy);
    ASSERT_EQ(want.size(), got.size());
    double max_d = 0;
    for (size_t i = 0; i < want.size(); ++i) max_d = std::max(max_d, static_cast<double>(std::fabs(want[i] - got[i])));
    std::printf("  %-24s legacy attn_kv_b vs split: max |dlogit| %.3g\n", m, max_d);
    // F32 files: the same weights in the same products, bit for bit. Q8_0:
    // the rebuilt attn_k_b is F32, so its products take F32 activations
    // instead of 8-bit ones (the golden tolerance between the two is 0.6).
    if (std::string(m).find("f32") != std::string::npos)
      EXPECT_EQ(max_d, 0.0) << m;
    else
      EXPECT_LE(max_d, 0.6) << m;
    ++n;
  }
  if (n == 0) GTEST_SKIP() << "no DeepSeek golden files in " << kGolden;
}

}  // namespace
}  // namespace colibri
