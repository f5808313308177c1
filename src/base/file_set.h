// A model's files opened for positioned reads, addressed as MappedFile maps
// them: one file at offset 0, or a split model's shards each at its part's
// begin. Each gets a buffered descriptor and, where asked and the file system
// allows, an O_DIRECT one. The dense loader and the expert store read
// through it.
#pragma once

#include <time.h>

#include <cstdint>
#include <string>
#include <vector>

#include "base/mapped_file.h"

namespace colibri {

class FileSet {
 public:
  struct File {
    std::string path;
    uint64_t begin = 0, size = 0;  // as MappedFile::Part
    int fd = -1, direct_fd = -1;
    timespec mtime{};
  };

  // Opens every part; a file whose size is no longer its part's throws
  // ("changed underneath"). With o_direct, every file gets an O_DIRECT
  // descriptor or none does, and *note says why not.
  FileSet(const std::vector<MappedFile::Part>& parts, bool o_direct, std::string* note);
  ~FileSet();
  FileSet(const FileSet&) = delete;
  FileSet& operator=(const FileSet&) = delete;

  bool direct() const { return direct_; }
  const std::vector<File>& files() const { return files_; }
  const std::string& path() const { return files_.front().path; }
  // The file holding offset off (begin <= off < begin + size). Throws Error
  // when none does.
  const File& at(uint64_t off) const;
  // posix_fadvise(advice) on every file, whole.
  void advise(int advice) const;
  // Throws Error when a file's size or modification time is not what it was
  // when opened: every file's, or one's.
  void check_unchanged() const;
  void check_unchanged(const File& f) const;

 private:
  std::vector<File> files_;
  bool direct_ = false;
};

}  // namespace colibri
