// Locating and reading the shared tokenizer test data (../shared).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "formats/gguf.h"

namespace colibri::test {

inline std::filesystem::path shared_dir() { return COLIBRI_SHARED_DIR; }
inline std::filesystem::path vocab_dir() { return shared_dir() / "data" / "vocab"; }

std::string read_file(const std::filesystem::path& p);

// llama.cpp's test-tokenizer-0 format: strings separated by
// "\n__ggml_vocab_test__\n" (a trailing separator ends the list).
std::vector<std::string> read_suite_inputs(const std::filesystem::path& p);
// One line of space-separated ids per string.
std::vector<std::vector<int32_t>> read_suite_outputs(const std::filesystem::path& p);

// The metadata of a GGUF file without its tensor table: the golden models
// of architectures (or tensor types, such as MXFP4) this build cannot load
// still carry a vocabulary to test. The tensor count in a copy of the file is
// set to 0, so only the header and the key-value pairs are parsed.
struct VocabOnlyGguf {
  std::vector<uint8_t> bytes;
  std::unique_ptr<GgufFile> file;
};
VocabOnlyGguf open_vocab_only(const std::filesystem::path& p);

// Renders a string with C-style escapes for failure messages.
std::string escaped(const std::string& s);

}  // namespace colibri::test
