// Writes the fuzzer's seed corpus: small valid GGUF files that between them
// use every metadata type, every weight dtype, 1 to 4 dims, several
// alignments and version 2. Usage: fuzz_gguf_seeds <dir>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "base/error.h"
#include "formats/gguf_writer.h"

namespace colibri {
namespace {

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(seed * 7 + i * 13);
  return b;
}

void add(GgufWriter& w, const std::string& name, DType t, std::vector<int64_t> ne, uint8_t seed) {
  int64_t rows = 1;
  for (size_t d = 1; d < ne.size(); ++d) rows *= ne[d];
  w.add_tensor(name, t, ne, pattern(row_bytes(t, ne[0]) * rows, seed));
}

GgufWriter empty() { return GgufWriter(); }

GgufWriter every_metadata_type() {
  GgufWriter w;
  w.set_u8("t.u8", 200);
  w.set_i8("t.i8", -5);
  w.set_u16("t.u16", 60000);
  w.set_i16("t.i16", -300);
  w.set_u32("t.u32", 70000);
  w.set_i32("t.i32", -70000);
  w.set_u64("t.u64", 1ull << 40);
  w.set_i64("t.i64", -(1ll << 40));
  w.set_f32("t.f32", 0.5f);
  w.set_f64("t.f64", -0.25);
  w.set_bool("t.bool", true);
  w.set_string("t.str", "hello");
  uint8_t u8s[] = {1, 2, 3};
  int16_t i16s[] = {-1, 1};
  uint64_t u64s[] = {1, 1ull << 50};
  double f64s[] = {1.5, -2.5};
  uint8_t bools[] = {0, 1};
  w.set_array("t.a.u8", GgufType::kUint8, u8s, 3);
  w.set_array("t.a.i16", GgufType::kInt16, i16s, 2);
  w.set_array("t.a.u64", GgufType::kUint64, u64s, 2);
  w.set_array("t.a.f64", GgufType::kFloat64, f64s, 2);
  w.set_array("t.a.bool", GgufType::kBool, bools, 2);
  w.set_array_i32("t.a.i32", {-1, 0, 1});
  w.set_array_f32("t.a.f32", {0.f, 1.f});
  w.set_array_str("t.a.str", {"x", "", "yz"});
  return w;
}

// The shape of a MoE model, shrunk: metadata keys and tensor names as
// llama.cpp writes them for qwen3moe.
GgufWriter tiny_moe() {
  GgufWriter w;
  w.set_string("general.architecture", "qwen3moe");
  w.set_string("general.name", "seed");
  w.set_u32("general.alignment", 32);
  w.set_u32("qwen3moe.block_count", 1);
  w.set_u32("qwen3moe.embedding_length", 8);
  w.set_u32("qwen3moe.expert_count", 4);
  w.set_u32("qwen3moe.expert_used_count", 2);
  w.set_u32("qwen3moe.expert_feed_forward_length", 4);
  w.set_u32("qwen3moe.attention.head_count", 2);
  w.set_u32("qwen3moe.attention.head_count_kv", 1);
  w.set_f32("qwen3moe.attention.layer_norm_rms_epsilon", 1e-6f);
  w.set_f32("qwen3moe.rope.freq_base", 1e6f);
  w.set_string("tokenizer.ggml.model", "gpt2");
  w.set_array_str("tokenizer.ggml.tokens", {"a", "b", "ab", "<s>"});
  w.set_array_i32("tokenizer.ggml.token_type", {1, 1, 1, 3});
  w.set_array_str("tokenizer.ggml.merges", {"a b"});
  w.set_u32("tokenizer.ggml.bos_token_id", 3);
  add(w, "token_embd.weight", DType::F32, {8, 4}, 1);
  add(w, "blk.0.attn_norm.weight", DType::F32, {8}, 2);
  add(w, "blk.0.attn_q.weight", DType::F16, {8, 8}, 3);
  add(w, "blk.0.ffn_gate_inp.weight", DType::F32, {8, 4}, 4);
  add(w, "blk.0.ffn_up_exps.weight", DType::Q8_0, {32, 4, 4}, 5);
  add(w, "blk.0.ffn_down_exps.weight", DType::Q4_0, {32, 8, 4}, 6);
  add(w, "output.weight", DType::BF16, {8, 4}, 7);
  return w;
}

GgufWriter every_dtype(size_t alignment) {
  GgufWriter w;
  w.set_string("general.architecture", "seed");
  w.set_alignment(alignment);
  DType types[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q4_0, DType::Q4_1,
                   DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::Q2_K, DType::Q3_K,
                   DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::MXFP4};
  uint8_t seed = 0;
  for (DType t : types) {
    int64_t n0 = dtype_info(t).block_size;
    if (n0 == 1) n0 = 3;
    std::vector<int64_t> ne = {n0};
    for (int d = 1; d <= seed % 4; ++d) ne.push_back(2);
    add(w, std::string("w.") + dtype_name(t), t, ne, seed++);
  }
  return w;
}

void save(const GgufWriter& w, const std::string& dir, const std::string& name,
          uint32_t version = 3) {
  std::vector<uint8_t> b = w.to_bytes();
  std::memcpy(b.data() + GgufLayout::kVersion, &version, 4);
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
    save(empty(), dir, "seed-empty.gguf");
    save(every_metadata_type(), dir, "seed-metadata.gguf");
    save(tiny_moe(), dir, "seed-moe.gguf");
    save(tiny_moe(), dir, "seed-moe-v2.gguf", 2);
    save(every_dtype(32), dir, "seed-dtypes.gguf");
    save(every_dtype(8), dir, "seed-dtypes-align8.gguf");
  } catch (const Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
