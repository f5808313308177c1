#include "tensor/iq_grids.h"

#include <cstring>

namespace colibri {

namespace {

template <int N, int Values, typename Word, typename V>
void expand(const uint16_t (&codes)[N], const V* values, int bits, Word (&out)[N]) {
  for (int i = 0; i < N; ++i) {
    uint8_t b[sizeof(Word)];
    for (int j = 0; j < static_cast<int>(sizeof(Word)); ++j) {
      const int c = (codes[i] >> (bits * j)) & ((1 << bits) - 1);
      b[j] = static_cast<uint8_t>(c < Values ? values[c] : 0);
    }
    std::memcpy(&out[i], b, sizeof(Word));
  }
}

IqGrids make() {
  IqGrids g;
  expand<256, 3>(iq_codes::kIq2xxsCodes, kIq2GridValues, 2, g.iq2xxs);
  expand<512, 3>(iq_codes::kIq2xsCodes, kIq2GridValues, 2, g.iq2xs);
  expand<1024, 3>(iq_codes::kIq2sCodes, kIq2GridValues, 2, g.iq2s);
  expand<256, 8>(iq_codes::kIq3xxsCodes, kIq3xxsGridValues, 3, g.iq3xxs);
  expand<512, 8>(iq_codes::kIq3sCodes, kIq3sGridValues, 3, g.iq3s);
  expand<2048, 3>(iq_codes::kIq1sCodes, kIq1GridValues, 2, g.iq1s);
  return g;
}

}  // namespace

const IqGrids& iq_grids() {
  static const IqGrids g = make();
  return g;
}

}  // namespace colibri
