#include "base/utf8.h"

namespace colibri {

namespace {
// Expected length of a sequence from its lead byte; 0 for a continuation or
// invalid lead byte.
int seq_len(unsigned char c) {
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return 2;
  if (c >= 0xE0 && c <= 0xEF) return 3;
  if (c >= 0xF0 && c <= 0xF4) return 4;
  return 0;
}
bool cont(unsigned char c) { return (c & 0xC0) == 0x80; }

// Length of a valid sequence at s[i], 0 if invalid, -1 if valid so far but cut short.
int valid_at(std::string_view s, size_t i) {
  unsigned char c = s[i];
  int n = seq_len(c);
  if (n == 0) return 0;
  for (int k = 1; k < n; ++k) {
    if (i + k >= s.size()) return -1;
    unsigned char d = s[i + k];
    if (!cont(d)) return 0;
    if (k == 1) {
      if (c == 0xE0 && d < 0xA0) return 0;
      if (c == 0xED && d > 0x9F) return 0;
      if (c == 0xF0 && d < 0x90) return 0;
      if (c == 0xF4 && d > 0x8F) return 0;
    }
  }
  return n;
}
}  // namespace

size_t utf8_complete_prefix(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    int n = valid_at(s, i);
    if (n < 0) return i;
    i += n == 0 ? 1 : n;
  }
  return i;
}

std::string utf8_sanitize(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    int n = valid_at(s, i);
    if (n > 0) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      out += "\xEF\xBF\xBD";
      // A cut-short sequence becomes one replacement character, as Python's
      // decode(errors="replace") renders it.
      if (n < 0) break;
      ++i;
    }
  }
  return out;
}

}  // namespace colibri
