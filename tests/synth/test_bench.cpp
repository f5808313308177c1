// The numbers `colibri bench` reports beside the clock.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "engine/bench.h"
#include "formats/gguf.h"
#include "model/synth.h"

namespace colibri {
namespace {

namespace fs = std::filesystem;

// Bytes per decoded token, counted independently from the file's tensor
// table: every tensor once, except the embedding table (one row) and the
// expert stacks (n_expert_used of n_expert slabs).
TEST(Bench, BytesPerTokenFromTheTensorTable) {
  const fs::path vocab = fs::path(COLIBRI_SHARED_DIR) / "data/vocab/ggml-vocab-qwen2.gguf";
  if (!fs::exists(vocab)) GTEST_SKIP() << vocab << " is absent (test data from ../shared)";
  for (const char* shape : {"tiny", "tiny-qwen2moe"}) {
    SynthOptions o;
    o.shape = *find_synth_shape(shape);
    o.type = SynthType::kQ4_K_M;
    o.vocab_path = vocab.string();
    fs::path p = fs::temp_directory_path() / ("colibri-bench-" + std::to_string(::getpid()) + "-" + shape + ".gguf");
    write_synth_model(o, p.string());
    auto f = GgufFile::open(p.string());
    double want = 0;
    for (const GgufTensor& t : f->tensors()) {
      if (t.name == "token_embd.weight")
        want += static_cast<double>(t.nbytes) / static_cast<double>(t.ne[1]);
      else if (t.name.ends_with("_exps.weight"))
        want += static_cast<double>(t.nbytes) * o.shape.n_expert_used / static_cast<double>(t.ne[2]);
      else
        want += static_cast<double>(t.nbytes);
    }
    ModelConfig c = ModelConfig::from_gguf(*f);
    ModelWeights w = bind_weights(*f, c);
    EXPECT_DOUBLE_EQ(decode_bytes_per_token(c, w), want) << shape;
    fs::remove(p);
  }
}

// The probe reads every byte (it checks its own sums) and reports a rate in a
// plausible range for any machine this runs on.
TEST(Bench, ReadBandwidthProbe) {
  double b1 = probe_read_bandwidth(1, size_t{64} << 20, 2);
  double b2 = probe_read_bandwidth(2, size_t{64} << 20, 2);
  EXPECT_GT(b1, 1e8);
  EXPECT_LT(b1, 1e13);
  EXPECT_GT(b2, 1e8);
  EXPECT_LT(b2, 1e13);
}

}  // namespace
}  // namespace colibri
