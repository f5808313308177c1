// What the tokenizer-import tests share: importing into a GGUF read back, and
// the 46 strings of llamacpp-tests.inp against a model's reference ids.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "formats/gguf.h"
#include "formats/gguf_writer.h"
#include "test_data.h"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace colibri::test {

inline std::filesystem::path tokenizers_dir() {
  return shared_dir() / "data/tokenizers";
}
inline std::filesystem::path vectors_dir() {
  return shared_dir() / "data/tokenizer-vectors";
}

// The GGUF bytes, the file read back and its tokenizer.
struct Imported {
  std::vector<uint8_t> bytes;
  std::unique_ptr<GgufFile> file;
  std::unique_ptr<Tokenizer> tok;
};

inline Imported import_tokenizer(const HfTokenizerFiles& files) {
  GgufWriter w;
  import_hf_tokenizer(files, w, "model");
  Imported m;
  m.bytes = w.to_bytes();
  m.file = GgufFile::parse(m.bytes.data(), m.bytes.size(), "imported.gguf");
  m.tok = Tokenizer::from_gguf(*m.file);
  return m;
}

// Every string of llamacpp-tests.inp encodes (no BOS, no special parsing) to
// the ids of `out_name`, and those ids decode to the string.
inline void expect_suite(const Tokenizer& tok, const std::string& out_name) {
  const auto inputs = read_suite_inputs(vectors_dir() / "llamacpp-tests.inp");
  const auto outputs = read_suite_outputs(vectors_dir() / out_name);
  ASSERT_EQ(inputs.size(), outputs.size());
  int failures = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const bool ok = tok.encode(inputs[i], false, false) == outputs[i];
    failures += ok ? 0 : 1;
    EXPECT_TRUE(ok) << out_name << " case " << i << " \"" << escaped(inputs[i]) << "\"";
    EXPECT_EQ(escaped(tok.decode(outputs[i], true, false)), escaped(inputs[i]))
        << out_name << " case " << i;
  }
  EXPECT_EQ(failures, 0) << "of " << inputs.size() << " cases";
}

}  // namespace colibri::test
