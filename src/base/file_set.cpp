#include "base/file_set.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/error.h"
#include "base/sys.h"

namespace colibri {

FileSet::FileSet(const std::vector<MappedFile::Part>& parts, bool o_direct, std::string* note) {
  CLB_CHECK(!parts.empty(), "no files to read");
  try {
    for (const MappedFile::Part& p : parts) {
      File f;
      f.path = p.path;
      f.begin = p.begin;
      f.size = p.size;
      f.fd = open(p.path.c_str(), O_RDONLY | O_CLOEXEC);
      CLB_CHECK(f.fd >= 0, "%s: %s", p.path.c_str(), std::strerror(errno));
      files_.push_back(f);
      struct stat st {};
      CLB_CHECK(fstat(f.fd, &st) == 0, "%s: %s", p.path.c_str(), std::strerror(errno));
      CLB_CHECK(
          static_cast<uint64_t>(st.st_size) == p.size,
          "%s: the file is %lld bytes, not the %llu it had when opened: it changed underneath",
          p.path.c_str(), static_cast<long long>(st.st_size),
          static_cast<unsigned long long>(p.size));
      files_.back().mtime = st.st_mtim;
    }
    if (o_direct) {
      direct_ = true;
      for (File& f : files_) {
        f.direct_fd = open(f.path.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT);
        if (f.direct_fd >= 0 && direct_reads_work(f.direct_fd)) continue;
        if (note)
          *note =
              strprintf("O_DIRECT does not work on %s (%s); buffered reads with fadvise instead",
                        f.path.c_str(), std::strerror(errno));
        direct_ = false;
        break;
      }
      if (!direct_)
        for (File& f : files_)
          if (f.direct_fd >= 0) close(f.direct_fd), f.direct_fd = -1;
    }
  } catch (const Error&) {
    for (File& f : files_) {
      if (f.fd >= 0) close(f.fd);
      if (f.direct_fd >= 0) close(f.direct_fd);
    }
    throw;
  }
}

FileSet::~FileSet() {
  for (File& f : files_) {
    if (f.fd >= 0) close(f.fd);
    if (f.direct_fd >= 0) close(f.direct_fd);
  }
}

const FileSet::File& FileSet::at(uint64_t off) const {
  for (const File& f : files_)
    if (off >= f.begin && off - f.begin < f.size) return f;
  fail("%s: offset %llu is in none of the model's %zu files", path().c_str(),
       static_cast<unsigned long long>(off), files_.size());
}

void FileSet::advise(int advice) const {
  for (const File& f : files_) posix_fadvise(f.fd, 0, 0, advice);
}

void FileSet::check_unchanged() const {
  for (const File& f : files_) check_unchanged(f);
}

void FileSet::check_unchanged(const File& f) const {
  struct stat st {};
  CLB_CHECK(fstat(f.fd, &st) == 0, "%s: %s", f.path.c_str(), std::strerror(errno));
  CLB_CHECK(static_cast<uint64_t>(st.st_size) == f.size && st.st_mtim.tv_sec == f.mtime.tv_sec &&
                st.st_mtim.tv_nsec == f.mtime.tv_nsec,
            "%s: the model file changed while in use (%llu bytes when opened, %lld now%s); "
            "restart to load the new file",
            f.path.c_str(), static_cast<unsigned long long>(f.size),
            static_cast<long long>(st.st_size),
            static_cast<uint64_t>(st.st_size) == f.size ? ", modified in place" : "");
}

}  // namespace colibri
