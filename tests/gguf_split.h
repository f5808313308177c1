// Test helper: a GGUF file written as llama.cpp's gguf-split writes a split
// model (examples/gguf-split): files PREFIX-00001-of-0000N.gguf ..., the
// tensors in order, cut into n files of about equal tensor count; the first
// file has every metadata key of the model, and every file has split.no (u16,
// from 0), split.count (u16) and split.tensors.count (i32, all tensors).
#pragma once

#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "formats/gguf.h"
#include "formats/gguf_writer.h"

namespace colibri::test {

inline std::string split_path(const std::string& prefix, int no, int n) {
  char suffix[40];
  std::snprintf(suffix, sizeof suffix, "-%05d-of-%05d.gguf", no + 1, n);
  return prefix + suffix;
}

// Returns the paths. edit(no, writer) may change a file's keys before its
// tensors are added (hostile variants).
inline std::vector<std::string> write_split_gguf(
    const GgufFile& src, const std::string& prefix, int n,
    const std::function<void(int, GgufWriter&)>& edit = {}) {
  std::vector<std::string> paths;
  const size_t n_tensors = src.tensors().size();
  for (int no = 0; no < n; ++no) {
    GgufWriter w;
    if (no == 0)
      for (const GgufKV& kv : src.metadata()) {
        if (kv.key == "general.alignment")
          w.set_alignment(kv.value.u);
        else
          w.set_value(kv.key, kv.value);
      }
    w.set_u16("split.no", static_cast<uint16_t>(no));
    w.set_u16("split.count", static_cast<uint16_t>(n));
    w.set_i32("split.tensors.count", static_cast<int32_t>(n_tensors));
    if (edit) edit(no, w);
    for (size_t i = n_tensors * no / n; i < n_tensors * (no + 1) / n; ++i) {
      const GgufTensor& t = src.tensors()[i];
      std::vector<int64_t> ne(t.ne, t.ne + t.n_dims);
      const uint8_t* d = src.tensor_data(t);
      w.add_tensor(t.name, t.type, ne, std::vector<uint8_t>(d, d + t.nbytes));
    }
    paths.push_back(split_path(prefix, no, n));
    w.write(paths.back());
  }
  return paths;
}

}  // namespace colibri::test
