#include "tokenizer/utf8.h"

namespace colibri {

namespace {

// How far s[pos..] follows a well-formed sequence (Unicode Table 3-7).
// `need` is the full length its lead byte announces (0 for a byte that leads
// nothing); the return value is how many bytes, lead included, conform.
size_t conforming_prefix(std::string_view s, size_t pos, size_t* need) {
  const uint8_t b0 = static_cast<uint8_t>(s[pos]);
  uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 < 0x80) {
    *need = 1;
    return 1;
  } else if (b0 >= 0xC2 && b0 <= 0xDF) {
    *need = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    *need = 3;
    if (b0 == 0xE0) lo = 0xA0;  // overlong
    if (b0 == 0xED) hi = 0x9F;  // surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    *need = 4;
    if (b0 == 0xF0) lo = 0x90;  // overlong
    if (b0 == 0xF4) hi = 0x8F;  // above U+10FFFF
  } else {
    *need = 0;
    return 0;
  }
  size_t n = 1;
  while (n < *need && pos + n < s.size()) {
    const uint8_t b = static_cast<uint8_t>(s[pos + n]);
    const uint8_t l = n == 1 ? lo : 0x80, h = n == 1 ? hi : 0xBF;
    if (b < l || b > h) break;
    ++n;
  }
  return n;
}

}  // namespace

size_t utf8_lead_len(uint8_t lead) {
  static constexpr uint8_t kLen[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLen[lead >> 4];
}

size_t utf8_decode(std::string_view s, size_t pos, uint32_t* cp) {
  size_t need = 0;
  const size_t n = conforming_prefix(s, pos, &need);
  if (need == 0 || n != need) return 0;
  const uint8_t b0 = static_cast<uint8_t>(s[pos]);
  uint32_t v = need == 1 ? b0 : need == 2 ? (b0 & 0x1F) : need == 3 ? (b0 & 0x0F) : (b0 & 0x07);
  for (size_t i = 1; i < need; ++i) v = (v << 6) | (static_cast<uint8_t>(s[pos + i]) & 0x3F);
  *cp = v;
  return need;
}

void utf8_append(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

bool utf8_is_valid(std::string_view s) {
  uint32_t cp = 0;
  for (size_t pos = 0; pos < s.size();) {
    if (static_cast<uint8_t>(s[pos]) < 0x80) {
      ++pos;
      continue;
    }
    const size_t n = utf8_decode(s, pos, &cp);
    if (n == 0) return false;
    pos += n;
  }
  return true;
}

std::string utf8_sanitize(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 8);
  uint32_t cp = 0;
  for (size_t pos = 0; pos < s.size();) {
    const size_t n = utf8_decode(s, pos, &cp);
    if (n == 0) {
      utf8_append(out, kReplacementChar);
      ++pos;
    } else {
      out.append(s.substr(pos, n));
      pos += n;
    }
  }
  return out;
}

size_t utf8_complete_prefix(std::string_view s) {
  // Only the last three bytes can belong to an unfinished sequence.
  const size_t first = s.size() > 3 ? s.size() - 3 : 0;
  for (size_t pos = first; pos < s.size(); ++pos) {
    size_t need = 0;
    const size_t n = conforming_prefix(s, pos, &need);
    if (need > 1 && n < need && pos + n == s.size()) return pos;
  }
  return s.size();
}

}  // namespace colibri
