// libFuzzer target for the safetensors reader: any bytes must parse or throw
// Error. A parse that succeeds must be safe to read (every tensor's first and
// last byte), consistent (each tensor inside the data section, nbytes that
// match its shape, the tensors back to back) and survive a round trip through
// the writer with the same table and bytes.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>

#include "base/error.h"
#include "formats/safetensors.h"
#include "formats/safetensors_writer.h"

namespace colibri {
namespace {

void check_round_trip(const SafetensorsFile& f) {
  SafetensorsWriter w;
  for (const auto& [k, v] : f.metadata()) w.set_metadata(k, v);
  for (const SafetensorsTensor& t : f.tensors())
    w.add(t.name, t.dtype, t.shape, std::vector<uint8_t>(f.data(t), f.data(t) + t.nbytes));
  std::vector<uint8_t> bytes = w.to_bytes();
  auto g = SafetensorsFile::parse(bytes.data(), bytes.size(), "round trip");
  CLB_ASSERT(g->metadata() == f.metadata());
  CLB_ASSERT(g->tensors().size() == f.tensors().size());
  for (size_t i = 0; i < f.tensors().size(); ++i) {
    const SafetensorsTensor &a = f.tensors()[i], &b = g->tensors()[i];
    CLB_ASSERT(a.name == b.name && a.dtype == b.dtype && a.shape == b.shape);
    CLB_ASSERT(a.offset - f.data_offset() == b.offset - g->data_offset());
    CLB_ASSERT(a.nbytes == b.nbytes);
    CLB_ASSERT(a.nbytes == 0 || std::memcmp(f.data(a), g->data(b), a.nbytes) == 0);
  }
}

void touch(const uint8_t* data, size_t size) {
  std::unique_ptr<SafetensorsFile> f;
  try {
    f = SafetensorsFile::parse(data, size, "fuzz");
  } catch (const Error&) {
    return;
  }
  // A volatile sink keeps the reads from being optimised away.
  volatile uint64_t sink = f->file_size() + f->data_offset();
  for (const auto& [k, v] : f->metadata()) sink = sink + k.size() + v.size();
  uint64_t at = f->data_offset();
  for (const SafetensorsTensor& t : f->tensors()) {
    CLB_ASSERT(f->find(t.name) == &t);
    CLB_ASSERT(t.offset == at);
    CLB_ASSERT(t.offset <= size && t.nbytes <= size - t.offset);
    CLB_ASSERT(t.n_elements() >= 0);
    CLB_ASSERT(static_cast<uint64_t>(t.n_elements()) * st_dtype_size(t.dtype) == t.nbytes);
    sink = sink + std::strlen(st_dtype_name(t.dtype));
    if (t.nbytes > 0) sink = sink + f->data(t)[0] + f->data(t)[t.nbytes - 1];
    at += t.nbytes;
  }
  CLB_ASSERT(at == size);
  (void)sink;
  check_round_trip(*f);
}

}  // namespace
}  // namespace colibri

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  colibri::touch(data, size);
  return 0;
}
