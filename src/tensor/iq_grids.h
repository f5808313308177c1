// The codebooks of the IQ1, IQ2 and IQ3 weight types (tensor/quant_blocks.h):
// the points a group's index selects, as they are part of the file format.
//
// Stored as value codes (iq_grids_data.cpp, written by tools/gen_iq_grids.py
// from a reference decoder) and expanded once into bytes: point i of an IQ2
// grid is the 8 bytes of iq2xxs[i] etc. (value j in byte j, little-endian),
// one of an IQ3 grid the 4 bytes of iq3xxs[i], one of IQ1's the 8 signed
// bytes (-1, 0, 1) of iq1s[i].
#pragma once

#include <cstdint>

namespace colibri {

namespace iq_codes {
extern const uint16_t kIq2xxsCodes[256];
extern const uint16_t kIq2xsCodes[512];
extern const uint16_t kIq2sCodes[1024];
extern const uint16_t kIq3xxsCodes[256];
extern const uint16_t kIq3sCodes[512];
extern const uint16_t kIq1sCodes[2048];
}  // namespace iq_codes

// The value sets the codes select from.
inline constexpr uint8_t kIq2GridValues[3] = {0x08, 0x19, 0x2B};
inline constexpr uint8_t kIq3xxsGridValues[8] = {0x04, 0x0C, 0x14, 0x1C, 0x24, 0x2C, 0x34, 0x3E};
inline constexpr uint8_t kIq3sGridValues[8] = {0x01, 0x03, 0x05, 0x07, 0x09, 0x0B, 0x0D, 0x0F};
inline constexpr int8_t kIq1GridValues[3] = {-1, 0, 1};

struct IqGrids {
  uint64_t iq2xxs[256];
  uint64_t iq2xs[512];
  uint64_t iq2s[1024];
  uint32_t iq3xxs[256];
  uint32_t iq3s[512];
  uint64_t iq1s[2048];
};

const IqGrids& iq_grids();

}  // namespace colibri
