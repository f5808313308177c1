// GPT-2's byte-level alphabet: every byte value is given a printable code
// point, so byte-level BPE vocabularies store arbitrary bytes as text.
// Bytes '!'..'~', 0xA1..0xAC and 0xAE..0xFF stand for themselves; the 68
// others take U+0100, U+0101, ... in byte order (space becomes U+0120 'Ġ').
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace colibri {

// The UTF-8 text of the code point that stands for byte b.
std::string_view byte_to_symbol(uint8_t b);

// The byte a code point stands for, or -1 when it stands for none.
int symbol_to_byte(uint32_t cp);

// Appends the symbols of every byte of `bytes` to out.
void append_byte_symbols(std::string_view bytes, std::string& out);

}  // namespace colibri
