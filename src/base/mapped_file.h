// A read-only memory map of a whole file, or of several files (a split
// model's shards) back to back in one address range.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace colibri {

class MappedFile {
 public:
  // One mapped file: its byte k is at data() + begin + k.
  struct Part {
    std::string path;
    int fd = -1;
    uint64_t begin = 0;
    uint64_t size = 0;
  };
  // Parts after the first begin on this boundary, at least a page after the
  // previous part's end: a page-rounded range of one part never reaches into
  // the next, and O_DIRECT alignment within a part carries over.
  static constexpr uint64_t kPartAlign = uint64_t{2} << 20;

  // Throws Error naming the path on failure (missing, unreadable, empty).
  explicit MappedFile(const std::string& path);
  // The files in order, each at its part's begin. Throws as above.
  explicit MappedFile(const std::vector<std::string>& paths);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  // The end of the last part: every byte of every part is below it.
  size_t size() const { return size_; }
  const std::string& path() const { return parts_.front().path; }
  int fd() const { return parts_.front().fd; }
  const std::vector<Part>& parts() const { return parts_; }

 private:
  void release();

  std::vector<Part> parts_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  size_t mapped_ = 0;  // bytes of address space to unmap
};

}  // namespace colibri
