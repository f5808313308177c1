#include "tokenizer/byte_level.h"

#include <array>

#include "tokenizer/utf8.h"

namespace colibri {

namespace {

struct ByteTable {
  std::array<uint32_t, 256> cp_of_byte{};
  std::array<std::string, 256> text_of_byte;
  std::array<int16_t, 256 + 68> byte_of_cp;  // -1 where a code point stands for no byte

  ByteTable() {
    byte_of_cp.fill(-1);
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      cp_of_byte[b] = printable ? static_cast<uint32_t>(b) : next++;
      byte_of_cp[cp_of_byte[b]] = static_cast<int16_t>(b);
      utf8_append(text_of_byte[b], cp_of_byte[b]);
    }
  }
};

const ByteTable& table() {
  static const ByteTable t;
  return t;
}

}  // namespace

std::string_view byte_to_symbol(uint8_t b) { return table().text_of_byte[b]; }

int symbol_to_byte(uint32_t cp) {
  const auto& t = table();
  return cp < t.byte_of_cp.size() ? t.byte_of_cp[cp] : -1;
}

void append_byte_symbols(std::string_view bytes, std::string& out) {
  const auto& t = table();
  for (char c : bytes) out += t.text_of_byte[static_cast<uint8_t>(c)];
}

}  // namespace colibri
