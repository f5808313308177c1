// Process facts the summaries report.
#pragma once

#include <cstddef>
#include <cstdint>

namespace colibri {

// Peak resident set size of this process (VmHWM), in bytes; 0 if unknown.
uint64_t peak_rss_bytes();
// Current resident set size (VmRSS), in bytes; 0 if unknown.
uint64_t current_rss_bytes();
// Monotonic seconds.
double now_seconds();
// CPU seconds the calling thread has used.
double thread_cpu_seconds();
// CPU seconds the hypervisor has taken from this machine's CPUs, all of them
// together (the steal column of /proc/stat's cpu line); 0 where unknown. A
// benchmark repeat that lost a share of its threads' time to it ran on less
// machine than it thinks.
double stolen_cpu_seconds();
// Drops [offset, offset + length) of fd's file from the page cache
// (POSIX_FADV_DONTNEED), widened to 2 MiB boundaries: the kernel keeps a
// cached folio (up to 2 MiB) that the range covers only in part, so an exact
// range leaves the folios at its ends behind (1.1 GB of a 16 GB model's dense
// reads stayed cached before the widening). Neighbouring pages dropped too are
// only read again if something wants them.
void drop_file_cache(int fd, uint64_t offset, uint64_t length);
// Takes [p, p + bytes) of a read-only file mapping out of this process's
// resident set (MADV_DONTNEED, widened to whole pages): a pass over a file
// larger than memory keeps only what it is reading. Pages read again fault
// back in from the file.
void release_mapped(const void* p, size_t bytes);
// The kernel's page size (sysconf(_SC_PAGESIZE)): 4 KiB on x86-64, 4, 16
// or 64 KiB on ARM64 (Apple, some Android kernels, RHEL's ARM kernels).
// O_DIRECT offsets, lengths and buffers, expert slots and mmap offsets are
// multiples of it.
size_t page_size();
// Whether O_DIRECT reads work on fd, opened with O_DIRECT (some file systems
// accept the flag at open and refuse the reads).
bool direct_reads_work(int fd);
// Makes [p, p + bytes) of a private anonymous mapping resident and writable
// now (MADV_POPULATE_WRITE, or a write per page where the kernel lacks it),
// so later reads into it, O_DIRECT ones included, do not fault page by page.
void populate_pages(void* p, size_t bytes);
// A private anonymous mapping of `bytes`, untouched (nullptr on failure,
// errno set). huge_pages: starts on a 2 MiB boundary and asks for
// transparent huge pages (MADV_HUGEPAGE; a hint the kernel may ignore), so
// first touching it costs one fault per 2 MiB instead of one per page.
// Release it with munmap(p, bytes).
void* map_anonymous(size_t bytes, bool huge_pages);
inline constexpr size_t kHugePageBytes = size_t{2} << 20;
// Bytes from offset `at` of such a mapping up to its next 2 MiB boundary,
// or up to `end` (its size) if that comes first: where memory from `at` on
// is dropped, what stays resident of the huge page `at` falls in (dropping
// part of a huge page splits it, and a split page stays charged whole until
// memory pressure finishes the split).
inline size_t huge_page_sliver(size_t at, size_t end) {
  const size_t up = (at + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  return up < end ? up - at : (end > at ? end - at : 0);
}

}  // namespace colibri
