#include "base/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/error.h"
#include "base/sys.h"

namespace colibri {

namespace {

// Opens a regular, non-empty file; its size in *size.
int open_regular(const std::string& path, uint64_t* size) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  CLB_CHECK(fd >= 0, "%s: cannot open: %s", path.c_str(), std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail("%s: not a regular file", path.c_str());
  }
  if (st.st_size == 0) {
    ::close(fd);
    fail("%s: file is empty", path.c_str());
  }
  *size = static_cast<uint64_t>(st.st_size);
  return fd;
}

}  // namespace

MappedFile::MappedFile(const std::string& path) {
  Part p;
  p.path = path;
  p.fd = open_regular(path, &p.size);
  parts_.push_back(p);
  size_ = mapped_ = static_cast<size_t>(p.size);
  void* m = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, p.fd, 0);
  if (m == MAP_FAILED) {
    const int e = errno;
    release();
    fail("%s: mmap failed: %s", path.c_str(), std::strerror(e));
  }
  data_ = static_cast<const uint8_t*>(m);
}

MappedFile::MappedFile(const std::vector<std::string>& paths) {
  CLB_CHECK(!paths.empty(), "no files to map");
  try {
    uint64_t at = 0;
    for (const std::string& path : paths) {
      if (!parts_.empty()) at = (at + page_size() + kPartAlign - 1) / kPartAlign * kPartAlign;
      Part p;
      p.path = path;
      p.begin = at;
      p.fd = open_regular(path, &p.size);
      parts_.push_back(p);
      at += p.size;
    }
  } catch (const Error&) {
    release();
    throw;
  }
  size_ = static_cast<size_t>(parts_.back().begin + parts_.back().size);
  // One reservation of address space (no memory), then each file over its
  // place in it.
  mapped_ = (size_ + page_size() - 1) / page_size() * page_size();
  void* base =
      ::mmap(nullptr, mapped_, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base == MAP_FAILED) {
    const int e = errno;
    mapped_ = 0;
    release();
    fail("%s: cannot reserve %zu bytes of address space for its %zu files: %s",
         paths.front().c_str(), size_, paths.size(), std::strerror(e));
  }
  data_ = static_cast<const uint8_t*>(base);
  for (const Part& p : parts_) {
    void* m = ::mmap(static_cast<uint8_t*>(base) + p.begin, p.size, PROT_READ,
                     MAP_SHARED | MAP_FIXED, p.fd, 0);
    if (m == MAP_FAILED) {
      const int e = errno;
      release();
      fail("%s: mmap failed: %s", p.path.c_str(), std::strerror(e));
    }
  }
}

void MappedFile::release() {
  if (data_) ::munmap(const_cast<uint8_t*>(data_), mapped_);
  data_ = nullptr;
  for (Part& p : parts_)
    if (p.fd >= 0) ::close(p.fd), p.fd = -1;
}

MappedFile::~MappedFile() {
  release();
}

}  // namespace colibri
