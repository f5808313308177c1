// UTF-8 helpers for streaming text out token by token: a token may end in
// the middle of a character, so output waits for the character to complete.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace colibri {

// Length of the longest prefix of s that does not end inside an incomplete
// UTF-8 sequence (invalid bytes count as complete, so nothing waits forever).
size_t utf8_complete_prefix(std::string_view s);

// s with invalid UTF-8 sequences replaced by U+FFFD.
std::string utf8_sanitize(std::string_view s);

}  // namespace colibri
