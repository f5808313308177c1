// A heap buffer aligned for SIMD loads and O_DIRECT reads. Sized once (from the
// model config) and reused: the decode loop never allocates.
#pragma once

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
  ~AlignedBuffer() { std::free(data_); }

  // Discards the contents; new elements are zeroed.
  void resize(size_t n) {
    std::free(data_);
    data_ = nullptr;
    size_ = 0;
    if (n == 0) return;
    size_t bytes = (n * sizeof(T) + kAlign - 1) / kAlign * kAlign;
    data_ = static_cast<T*>(std::aligned_alloc(kAlign, bytes));
    if (!data_) throw std::bad_alloc();
    __builtin_memset(static_cast<void*>(data_), 0, bytes);
    size_ = n;
  }

  T* data() { return data_; }
  const T* data() const { return data_; }
  size_t size() const { return size_; }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }

 private:
  void swap(AlignedBuffer& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(size_, o.size_);
  }
  T* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace colibri
