#include "test_data.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace colibri::test {

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

VocabOnlyGguf open_vocab_only(const std::filesystem::path& p) {
  VocabOnlyGguf v;
  const std::string all = read_file(p);
  v.bytes.assign(all.begin(), all.end());
  // Header: magic (4 bytes), version (4), tensor count (8), metadata count (8).
  if (v.bytes.size() >= 16) std::fill(v.bytes.begin() + 8, v.bytes.begin() + 16, uint8_t{0});
  v.file = GgufFile::parse(v.bytes.data(), v.bytes.size(), p.string());
  return v;
}

std::vector<std::string> read_suite_inputs(const std::filesystem::path& p) {
  const std::string all = read_file(p);
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= all.size()) {
    const size_t next = all.find(sep, pos);
    if (next == std::string::npos) {
      if (pos < all.size()) out.push_back(all.substr(pos));
      break;
    }
    out.push_back(all.substr(pos, next - pos));
    pos = next + sep.size();
  }
  return out;
}

std::vector<std::vector<int32_t>> read_suite_outputs(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::vector<std::vector<int32_t>> out;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::vector<int32_t> ids;
    int32_t id;
    while (ls >> id) ids.push_back(id);
    out.push_back(std::move(ids));
  }
  return out;
}

std::string escaped(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == '\r') out += "\\r";
    else if (c < 0x20 || c == 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    } else out += static_cast<char>(c);
  }
  return out;
}

}  // namespace colibri::test
