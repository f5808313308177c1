// libFuzzer target for the GGUF reader: any bytes must parse or throw Error;
// everything a parse returns must be safe to read (see gguf_touch.h).
#include <cstddef>
#include <cstdint>

#include "gguf_touch.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  colibri::touch_gguf(data, size);
  return 0;
}
