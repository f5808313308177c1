#include "base/atomic_file.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "base/error.h"

namespace colibri {

void write_file_atomically(const std::string& path,
                           const std::function<void(const ByteSink&)>& emit) {
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  CLB_CHECK(f != nullptr, "%s: cannot create: %s", tmp.c_str(), std::strerror(errno));
  try {
    emit([&](const uint8_t* p, size_t n) {
      // A zero-size tensor's bytes may be a null pointer, which fwrite must not get.
      if (n == 0) return;
      CLB_CHECK(std::fwrite(p, 1, n, f) == n, "%s: write failed: %s", tmp.c_str(),
                std::strerror(errno));
    });
    const int rc = std::fclose(f);
    f = nullptr;
    CLB_CHECK(rc == 0, "%s: write failed: %s", tmp.c_str(), std::strerror(errno));
    CLB_CHECK(std::rename(tmp.c_str(), path.c_str()) == 0, "%s: cannot rename to %s: %s",
              tmp.c_str(), path.c_str(), std::strerror(errno));
  } catch (...) {
    if (f) std::fclose(f);
    std::remove(tmp.c_str());
    throw;
  }
}

}  // namespace colibri
