// Parses untrusted bytes as GGUF and touches everything the parse returned:
// every metadata value through every getter, every tensor's view and the
// first and last byte of its data. Shared by the fuzz target and the test that
// replays the corpus, so both exercise exactly the same paths.
//
// Returns true when the bytes parsed; Error (bad input) gives false. Any other
// outcome (a crash, a sanitizer report, another exception) is a bug.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "base/error.h"
#include "formats/gguf.h"

namespace colibri {

inline bool touch_gguf(const uint8_t* data, size_t size) {
  std::unique_ptr<GgufFile> f;
  try {
    f = GgufFile::parse(data, size, "fuzz");
  } catch (const Error&) {
    return false;
  }
  // A volatile sink keeps the reads from being optimised away.
  volatile uint64_t sink = f->version() + f->alignment() + f->data_offset();
  auto attempt = [&](auto&& get) {
    try {
      get();
    } catch (const Error&) {
    }
  };
  for (const GgufKV& kv : f->metadata()) {
    const std::string& k = kv.key;
    sink = sink + gguf_value_to_string(kv.value).size();
    sink = sink + (f->find(k) != nullptr);
    attempt([&] { sink = sink + f->get_uint(k).value_or(0); });
    attempt([&] { sink = sink + static_cast<uint64_t>(f->get_float(k).value_or(0) != 0); });
    attempt([&] { sink = sink + f->get_bool(k).value_or(false); });
    attempt([&] { sink = sink + f->get_string(k).value_or("").size(); });
    attempt([&] {
      if (const auto* a = f->get_string_array(k))
        for (std::string_view s : *a) sink = sink + s.size();
    });
    attempt([&] {
      if (auto a = f->get_f32_array(k))
        for (float x : *a) sink = sink + static_cast<uint64_t>(x != 0);
    });
    attempt([&] {
      if (auto a = f->get_int_array(k))
        for (int64_t x : *a) sink = sink + static_cast<uint64_t>(x);
    });
    attempt([&] { sink = sink + f->require_uint(k); });
    attempt([&] { sink = sink + f->require_string(k).size(); });
  }
  for (const GgufTensor& t : f->tensors()) {
    sink = sink + (f->find_tensor(t.name) != nullptr);
    TensorView v = f->view(t);
    sink = sink + static_cast<uint64_t>(v.n_rows()) + v.row_stride() + v.slab_bytes();
    if (t.nbytes > 0) {
      const uint8_t* p = f->tensor_data(t);
      sink = sink + p[0] + p[t.nbytes - 1];
      const uint8_t* last_row = v.row(v.n_rows() - 1);
      sink = sink + last_row[v.row_stride() - 1];
      const uint8_t* last_slab = v.slab(v.ne[2] * v.ne[3] - 1).data;
      sink = sink + last_slab[0];
    }
  }
  (void)sink;
  return true;
}

}  // namespace colibri
