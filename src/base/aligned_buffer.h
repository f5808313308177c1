// A heap buffer aligned for SIMD loads and O_DIRECT reads. Sized once (from the
// model config) and reused: the decode loop never allocates. Large buffers
// (the KV cache) are fresh anonymous mappings, zero without being written, so
// their pages cost nothing until used: a 40k-token cache does not make the
// first token wait for hundreds of megabytes of page faults.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdlib>
#include <new>
#include <utility>

namespace colibri {

template <typename T>
class AlignedBuffer {
 public:
  static constexpr size_t kAlign = 4096;

  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t n) { resize(n); }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  AlignedBuffer(AlignedBuffer&& o) noexcept { swap(o); }
  AlignedBuffer& operator=(AlignedBuffer&& o) noexcept {
    swap(o);
    return *this;
  }
  ~AlignedBuffer() { release(); }

  // Discards the contents; new elements are zeroed.
  void resize(size_t n) {
    release();
    if (n == 0) return;
    const size_t bytes = (n * sizeof(T) + kAlign - 1) / kAlign * kAlign;
    if (bytes >= kMapBytes) {
      void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) throw std::bad_alloc();
      data_ = static_cast<T*>(p);
    } else {
      data_ = static_cast<T*>(std::aligned_alloc(kAlign, bytes));
      if (!data_) throw std::bad_alloc();
      __builtin_memset(static_cast<void*>(data_), 0, bytes);
    }
    size_ = n;
    bytes_ = bytes;
  }

  T* data() { return data_; }
  const T* data() const { return data_; }
  size_t size() const { return size_; }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }

 private:
  static constexpr size_t kMapBytes = 1u << 20;

  void release() {
    if (data_ && bytes_ >= kMapBytes)
      munmap(data_, bytes_);
    else
      std::free(data_);
    data_ = nullptr;
    size_ = bytes_ = 0;
  }
  void swap(AlignedBuffer& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(size_, o.size_);
    std::swap(bytes_, o.bytes_);
  }
  T* data_ = nullptr;
  size_t size_ = 0, bytes_ = 0;
};

}  // namespace colibri
