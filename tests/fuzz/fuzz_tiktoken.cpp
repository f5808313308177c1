// libFuzzer target for the tiktoken readers (tokenizer/tiktoken.h), whose
// inputs come with a model folder. The first byte picks the reader, the rest
// is its input; any bytes must give a result or throw Error.
//  - a BPE file: the ranks it reads are distinct, hold every byte, and each
//    recovered merge joins two lower ranks into the token of its rank;
//  - a Python module: pat_str and num_reserved_special_tokens.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_set>

#include "base/error.h"
#include "tokenizer/tiktoken.h"

namespace colibri {
namespace {

void check_ranks(std::string_view text) {
  std::vector<std::string> tokens;
  try {
    tokens = read_tiktoken_ranks(text, "fuzz");
  } catch (const Error&) {
    return;
  }
  CLB_ASSERT(tokens.size() >= 256);
  std::unordered_set<std::string> seen(tokens.begin(), tokens.end());
  CLB_ASSERT(seen.size() == tokens.size());
  std::vector<std::pair<int32_t, int32_t>> merges;
  try {
    merges = recover_tiktoken_merges(tokens, "fuzz");
  } catch (const Error&) {
    return;
  }
  size_t m = 0;
  for (size_t r = 0; r < tokens.size(); ++r) {
    if (tokens[r].size() < 2) continue;
    CLB_ASSERT(m < merges.size());
    const auto [a, b] = merges[m++];
    CLB_ASSERT(a >= 0 && b >= 0 && a < static_cast<int32_t>(r) && b < static_cast<int32_t>(r));
    CLB_ASSERT(tokens[a] + tokens[b] == tokens[r]);
  }
  CLB_ASSERT(m == merges.size());
}

void check_module(std::string_view src) {
  try {
    python_string_constant(src, "pat_str", "fuzz");
  } catch (const Error&) {
  }
  try {
    python_int_constant(src, "num_reserved_special_tokens", "fuzz");
  } catch (const Error&) {
  }
}

}  // namespace
}  // namespace colibri

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] & 1)
    colibri::check_module(rest);
  else
    colibri::check_ranks(rest);
  return 0;
}
