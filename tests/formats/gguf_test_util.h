// Helpers for GGUF tests: a small valid model, byte patching at the offsets
// the writer reports, and assertions on the Error a bad file must raise.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "base/error.h"
#include "formats/gguf.h"
#include "formats/gguf_writer.h"

namespace colibri::test {

// fn must throw colibri::Error whose message contains every part.
inline testing::AssertionResult ThrowsErrorWith(const std::function<void()>& fn,
                                                const std::vector<std::string>& parts) {
  try {
    fn();
  } catch (const Error& e) {
    std::string m = e.what();
    for (const std::string& p : parts)
      if (m.find(p) == std::string::npos)
        return testing::AssertionFailure() << "message \"" << m << "\" lacks \"" << p << "\"";
    return testing::AssertionSuccess() << m;
  } catch (const std::exception& e) {
    return testing::AssertionFailure() << "threw a non-Error exception: " << e.what();
  }
  return testing::AssertionFailure() << "did not throw";
}

inline testing::AssertionResult ParseFailsWith(const std::vector<uint8_t>& bytes,
                                               const std::vector<std::string>& parts) {
  return ThrowsErrorWith([&] { GgufFile::parse(bytes.data(), bytes.size(), "bad.gguf"); }, parts);
}

template <typename T>
void patch(std::vector<uint8_t>& bytes, size_t at, T v) {
  ASSERT_LE(at + sizeof(T), bytes.size());
  std::memcpy(bytes.data() + at, &v, sizeof(T));
}

// The fields of key in the writer's output.
inline const GgufLayout::Kv& kv_field(const GgufLayout& l, const std::vector<uint8_t>& bytes,
                                      const std::string& key) {
  for (const GgufLayout::Kv& kv : l.kvs) {
    uint64_t len;
    std::memcpy(&len, bytes.data() + kv.key, 8);
    if (std::string(reinterpret_cast<const char*>(bytes.data() + kv.key + 8), len) == key)
      return kv;
  }
  ADD_FAILURE() << "no key " << key;
  return l.kvs.at(0);
}

inline std::vector<uint8_t> iota_bytes(size_t n, uint8_t seed) {
  std::vector<uint8_t> b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(seed + i * 31 + (i >> 8));
  return b;
}

// A small valid model touching every value kind and three dtypes. Tensor 2 is
// a 3-D expert stack; the last tensor ends exactly at the end of the file.
inline GgufWriter small_model() {
  GgufWriter w;
  w.set_string("general.architecture", "qwen3moe");
  w.set_string("general.name", "tiny");
  w.set_u32("qwen3moe.block_count", 1);
  w.set_u32("qwen3moe.expert_count", 2);
  w.set_f32("qwen3moe.attention.layer_norm_rms_epsilon", 1e-6f);
  w.set_bool("tiny.flag", true);
  w.set_array_str("tokenizer.ggml.tokens", {"a", "b", "c"});
  w.set_array_i32("tokenizer.ggml.token_type", {1, 1, 3});
  w.set_array_f32("tokenizer.ggml.scores", {0.f, -1.f, -2.f});
  w.add_tensor("token_embd.weight", DType::F32, {8, 3}, iota_bytes(8 * 3 * 4, 1));
  w.add_tensor("blk.0.ffn_up_exps.weight", DType::Q8_0, {32, 2, 2}, iota_bytes(4 * 34, 2));
  w.add_tensor("output_norm.weight", DType::F32, {8}, iota_bytes(32, 3));
  return w;
}

}  // namespace colibri::test
