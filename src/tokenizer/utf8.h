// UTF-8 helpers shared by the tokenizers: strict decoding, the repair policy
// llama.cpp applies, and the boundary a streaming printer must wait at.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace colibri {

inline constexpr uint32_t kReplacementChar = 0xFFFD;

// Length of the sequence a lead byte announces, judged from its top four bits
// alone (1 for continuation and invalid bytes). SentencePiece-style splitting
// uses this without further checks, as llama.cpp does.
size_t utf8_lead_len(uint8_t lead);

// Decodes one well-formed scalar value at s[pos] (no overlongs, surrogates or
// values above U+10FFFF). Returns its length, or 0 if s[pos] starts no
// well-formed sequence.
size_t utf8_decode(std::string_view s, size_t pos, uint32_t* cp);

void utf8_append(std::string& out, uint32_t cp);

bool utf8_is_valid(std::string_view s);

// Replaces every byte that starts no well-formed sequence with U+FFFD, one
// replacement per byte. This is what llama.cpp's code point decoder does to a
// prompt before byte-level BPE sees it, and how the golden outputs render
// detokenized text (a truncated 3-byte sequence shows as two U+FFFD, not the
// one that Python's errors="replace" would give).
std::string utf8_sanitize(std::string_view s);

// Length of the longest prefix of s that does not end inside a sequence which
// the next bytes could still complete. Ill-formed bytes count as complete.
size_t utf8_complete_prefix(std::string_view s);

}  // namespace colibri
