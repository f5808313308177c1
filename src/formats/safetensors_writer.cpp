#include "formats/safetensors_writer.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>

#include "base/atomic_file.h"
#include "base/error.h"

namespace colibri {

namespace {

using Json = nlohmann::json;

// A JSON string literal escaped as serde_json escapes it (quote, backslash and
// control bytes only; UTF-8 as is), so headers match the official writer's.
std::string json_string(const std::string& s, const char* what) {
  try {
    return Json(s).dump(-1, ' ', false, Json::error_handler_t::strict);
  } catch (const Json::exception&) {
    fail("safetensors writer: %s is not valid UTF-8", what);
  }
}

using Sink = ByteSink;

}  // namespace

void SafetensorsWriter::set_metadata(const std::string& key, const std::string& value) {
  for (auto& kv : metadata_) {
    if (kv.first == key) {
      kv.second = value;
      return;
    }
  }
  metadata_.emplace_back(key, value);
}

void SafetensorsWriter::add(const std::string& name, StDType dtype, std::vector<int64_t> shape,
                            std::vector<uint8_t> bytes) {
  const char* n = name.c_str();
  CLB_CHECK(name != "__metadata__", "safetensors writer: __metadata__ is not a tensor name");
  CLB_CHECK(!tensor_index_.count(name), "safetensors writer: tensor %s added twice", n);
  int64_t count = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    CLB_CHECK(shape[d] >= 0, "safetensors writer: tensor %s: dimension %zu is %lld", n, d,
              static_cast<long long>(shape[d]));
    CLB_CHECK(!__builtin_mul_overflow(count, shape[d], &count),
              "safetensors writer: tensor %s: element count overflows", n);
  }
  size_t esize = st_dtype_size(dtype);
  CLB_CHECK(static_cast<uint64_t>(count) <= std::numeric_limits<size_t>::max() / esize &&
                bytes.size() == static_cast<size_t>(count) * esize,
            "safetensors writer: tensor %s: expected %lld elements of %s, got %zu bytes", n,
            static_cast<long long>(count), st_dtype_name(dtype), bytes.size());
  tensor_index_.emplace(name, tensors_.size());
  tensors_.push_back({name, dtype, std::move(shape), std::move(bytes)});
}

std::vector<uint8_t> SafetensorsWriter::header() const {
  std::string j = "{";
  if (!metadata_.empty()) {
    j += "\"__metadata__\":{";
    for (size_t i = 0; i < metadata_.size(); ++i) {
      const auto& [k, v] = metadata_[i];
      j += (i ? "," : "") + json_string(k, ("metadata key " + k).c_str()) + ":" +
           json_string(v, ("metadata value of " + k).c_str());
    }
    j += "}";
  }
  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    if (j.size() > 1) j += ",";
    j += json_string(t.name, ("tensor name " + t.name).c_str());
    j += ":{\"dtype\":\"";
    j += st_dtype_name(t.dtype);
    j += "\",\"shape\":[";
    for (size_t d = 0; d < t.shape.size(); ++d) j += (d ? "," : "") + std::to_string(t.shape[d]);
    j += "],\"data_offsets\":[" + std::to_string(offset) + ",";
    offset += t.bytes.size();
    j += std::to_string(offset) + "]}";
  }
  j += "}";
  j.append((8 - j.size() % 8) % 8, ' ');

  std::vector<uint8_t> out(8 + j.size());
  uint64_t n = j.size();
  std::memcpy(out.data(), &n, 8);
  std::memcpy(out.data() + 8, j.data(), j.size());
  return out;
}

std::vector<uint8_t> SafetensorsWriter::to_bytes() const {
  std::vector<uint8_t> out = header();
  for (const Tensor& t : tensors_) out.insert(out.end(), t.bytes.begin(), t.bytes.end());
  return out;
}

void SafetensorsWriter::write(const std::string& path) const {
  write_file_atomically(path, [&](const Sink& sink) {
    std::vector<uint8_t> h = header();
    sink(h.data(), h.size());
    for (const Tensor& t : tensors_) sink(t.bytes.data(), t.bytes.size());
  });
}

void write_safetensors_index(const std::string& path,
                             const std::vector<std::pair<std::string, std::string>>& weight_map) {
  Json map = Json::object();
  for (const auto& [tensor, shard] : weight_map) {
    CLB_CHECK(!map.contains(tensor), "%s: tensor %s is in the weight map twice", path.c_str(),
              tensor.c_str());
    map[tensor] = shard;
  }
  Json index = {{"metadata", Json::object()}, {"weight_map", std::move(map)}};
  std::string text;
  try {
    text = index.dump(2, ' ', false, Json::error_handler_t::strict) + "\n";
  } catch (const Json::exception&) {
    fail("%s: a tensor or shard name is not valid UTF-8", path.c_str());
  }
  write_file_atomically(path, [&](const Sink& sink) {
    sink(reinterpret_cast<const uint8_t*>(text.data()), text.size());
  });
}

}  // namespace colibri
