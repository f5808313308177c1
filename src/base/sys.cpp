#include "base/sys.h"

#include <fcntl.h>

#include <chrono>
#include <cstdio>
#include <cstring>

namespace colibri {

namespace {
uint64_t status_kb(const char* field) {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return 0;
  char line[256];
  uint64_t kb = 0;
  size_t n = std::strlen(field);
  while (std::fgets(line, sizeof line, f))
    if (std::strncmp(line, field, n) == 0) {
      std::sscanf(line + n, " %lu", &kb);
      break;
    }
  std::fclose(f);
  return kb;
}
}  // namespace

uint64_t peak_rss_bytes() { return status_kb("VmHWM:") * 1024; }
uint64_t current_rss_bytes() { return status_kb("VmRSS:") * 1024; }

double now_seconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

void drop_file_cache(int fd, uint64_t offset, uint64_t length) {
  constexpr uint64_t kFolio = 2u << 20;
  const uint64_t a = offset / kFolio * kFolio, b = (offset + length + kFolio - 1) / kFolio * kFolio;
  posix_fadvise(fd, static_cast<off_t>(a), static_cast<off_t>(b - a), POSIX_FADV_DONTNEED);
}

}  // namespace colibri
