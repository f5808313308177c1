// A read-only memory map of a whole file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace colibri {

class MappedFile {
 public:
  // Throws Error naming the path on failure (missing, unreadable, empty).
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  int fd() const { return fd_; }

 private:
  std::string path_;
  int fd_ = -1;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace colibri
