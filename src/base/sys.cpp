#include "base/sys.h"

#include <ctime>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
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

double thread_cpu_seconds() {
  struct timespec ts {};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

double stolen_cpu_seconds() {
  FILE* f = std::fopen("/proc/stat", "r");
  if (!f) return 0;
  // cpu user nice system idle iowait irq softirq steal ...
  unsigned long long v[8] = {};
  const int got = std::fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2],
                              &v[3], &v[4], &v[5], &v[6], &v[7]);
  std::fclose(f);
  const long hz = sysconf(_SC_CLK_TCK);
  return got == 8 && hz > 0 ? static_cast<double>(v[7]) / static_cast<double>(hz) : 0.0;
}

void drop_file_cache(int fd, uint64_t offset, uint64_t length) {
  constexpr uint64_t kFolio = 2u << 20;
  const uint64_t a = offset / kFolio * kFolio, b = (offset + length + kFolio - 1) / kFolio * kFolio;
  posix_fadvise(fd, static_cast<off_t>(a), static_cast<off_t>(b - a), POSIX_FADV_DONTNEED);
}

void release_mapped(const void* p, size_t bytes) {
  if (bytes == 0) return;
  const uintptr_t page = page_size();
  const uintptr_t a = reinterpret_cast<uintptr_t>(p) / page * page;
  const uintptr_t b = (reinterpret_cast<uintptr_t>(p) + bytes + page - 1) / page * page;
  madvise(reinterpret_cast<void*>(a), b - a, MADV_DONTNEED);
}

size_t page_size() {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

bool direct_reads_work(int fd) {
  const size_t page = page_size();
  void* buf = std::aligned_alloc(page, page);
  const bool ok = buf && pread(fd, buf, page, 0) >= 0;
  std::free(buf);
  return ok;
}

void* map_anonymous(size_t bytes, bool huge_pages) {
  constexpr size_t kHuge = kHugePageBytes;
  const size_t extra = huge_pages ? kHuge : 0;
  void* m = mmap(nullptr, bytes + extra, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return nullptr;
  if (!huge_pages) return m;
  // Trim the mapping to a 2 MiB-aligned start; the slack goes back.
  auto* base = static_cast<uint8_t*>(m);
  const uintptr_t a = reinterpret_cast<uintptr_t>(base);
  uint8_t* p = base + ((kHuge - a % kHuge) % kHuge);
  const size_t page = page_size(), used = (bytes + page - 1) / page * page;
  if (p > base) munmap(base, static_cast<size_t>(p - base));
  uint8_t* end = base + bytes + extra;
  if (p + used < end) munmap(p + used, static_cast<size_t>(end - (p + used)));
#ifdef MADV_HUGEPAGE
  madvise(p, bytes, MADV_HUGEPAGE);
#endif
  return p;
}

void populate_pages(void* p, size_t bytes) {
#ifndef MADV_POPULATE_WRITE
  constexpr int MADV_POPULATE_WRITE = 23;  // Linux 5.14
#endif
  if (bytes == 0 || madvise(p, bytes, MADV_POPULATE_WRITE) == 0) return;
  const size_t page = page_size();
  auto* b = static_cast<volatile uint8_t*>(p);
  for (size_t i = 0; i < bytes; i += page) b[i] = b[i];
}

}  // namespace colibri
