#include "model/kv_cache.h"

#include <cstring>

#include "base/sys.h"
#include "tensor/ops.h"

namespace colibri {

void KVCache::check_type(const ModelConfig& c, DType type) {
  CLB_CHECK(type == DType::F16 || type == DType::F32 || type == DType::Q8_0 || type == DType::Q4_0,
            "the KV cache is stored as f16, f32, q8_0 or q4_0, not %s", dtype_info(type).name);
  const bool blocks = type == DType::Q8_0 || type == DType::Q4_0;
  CLB_CHECK(
      !blocks || (c.head_dim % kQK == 0 && c.head_dim_v % kQK == 0),
      "a %s KV cache stores blocks of %d values, and this model's attention heads have %d key "
      "and %d value dimensions: use --kv-type f16",
      dtype_info(type).name, kQK, c.head_dim, c.head_dim_v);
}

KVCache::KVCache(const ModelConfig& c, int n_ctx, int n_seq, DType type)
    : n_layer_(c.n_layer), n_head_kv_(c.n_head_kv), n_ctx_(n_ctx), n_seq_(n_seq), hd_k_(c.head_dim),
      hd_v_(c.head_dim_v), v_in_k_(c.is_mla()), type_(type), unit_(row_bytes(type, dtype_info(type).block_size)),
      k_row_(row_bytes(type, c.head_dim)), v_row_(row_bytes(type, c.head_dim_v)) {
  check_type(c, type);
  CLB_CHECK(n_ctx > 0 && n_seq > 0, "context size %d and sequence count %d must be positive", n_ctx,
            n_seq);
  const size_t rows = static_cast<size_t>(n_seq) * n_layer_ * n_head_kv_ * n_ctx;
  k_.resize(rows * k_row_);
  if (!v_in_k_) v_.resize(rows * v_row_);
  mark_.assign(n_seq, 0);
  present_.assign(n_seq, 0);
}

void KVCache::commit_growth() {
  if (!marks_moved_) return;
  marks_moved_ = false;
  const uint64_t page = page_size();
  // Pages of [start, start + len) of a block, len > 0.
  auto pages = [&](uint64_t start, uint64_t len) { return ((start + len - 1) / page - start / page + 1) * page; };
  uint64_t bytes = 0;
  for (int seq = 0; seq < n_seq_; ++seq) {
    if (mark_[seq] == 0) continue;
    for (int l = 0; l < n_layer_; ++l)
      for (int h = 0; h < n_head_kv_; ++h) {
        const uint64_t row = index(seq, l, h);
        bytes += pages(row * k_row_, static_cast<uint64_t>(mark_[seq]) * k_row_);
        if (!v_in_k_) bytes += pages(row * v_row_, static_cast<uint64_t>(mark_[seq]) * v_row_);
      }
  }
  if (bytes > touched_) {
    touched_ = bytes;
    if (listener_) listener_(bytes);
  }
  // The room is given; now the pages of rows [present, mark) of each block.
  auto populate = [&](AlignedBuffer<uint8_t>& buf, size_t row_bytes, uint64_t row, int from,
                      int to) {
    const uint64_t begin = (row + from) * row_bytes / page * page, end = (row + to) * row_bytes;
    populate_pages(buf.data() + begin, end - begin);
  };
  for (int seq = 0; seq < n_seq_; ++seq) {
    if (mark_[seq] <= present_[seq]) continue;
    for (int l = 0; l < n_layer_; ++l)
      for (int h = 0; h < n_head_kv_; ++h) {
        const uint64_t row = index(seq, l, h);
        populate(k_, k_row_, row, present_[seq], mark_[seq]);
        if (!v_in_k_) populate(v_, v_row_, row, present_[seq], mark_[seq]);
      }
    present_[seq] = mark_[seq];
  }
}

namespace {
void store_row(const float* src, size_t n, DType type, uint8_t* dst) {
  if (type == DType::F32)
    std::memcpy(dst, src, n * sizeof(float));
  else if (type == DType::F16)
    fp32_to_fp16_row(src, reinterpret_cast<uint16_t*>(dst), static_cast<int64_t>(n));
  else if (type == DType::Q8_0)
    fp32_to_q8_0_row(src, reinterpret_cast<block_q8_0*>(dst), static_cast<int64_t>(n));
  else
    fp32_to_q4_0_row(src, reinterpret_cast<block_q4_0*>(dst), static_cast<int64_t>(n));
}
}  // namespace

void KVCache::write(int seq, int l, int pos, const float* k, const float* v) {
  CLB_ASSERT(seq < n_seq_ && pos < n_ctx_);
  for (int h = 0; h < n_head_kv_; ++h) {
    store_row(k + h * hd_k_, hd_k_, type_, k_.data() + index(seq, l, h, pos) * k_row_);
    if (!v_in_k_) store_row(v + h * hd_v_, hd_v_, type_, v_.data() + index(seq, l, h, pos) * v_row_);
  }
}

void KVCache::copy_prefix(int from, int to, int n) {
  CLB_ASSERT(n <= n_ctx_ && from < n_seq_ && to < n_seq_);
  if (from == to || n <= 0) return;
  will_write(to, n);
  commit_growth();
  for (int l = 0; l < n_layer_; ++l)
    for (int h = 0; h < n_head_kv_; ++h) {
      std::memcpy(k_.data() + index(to, l, h) * k_row_, k_.data() + index(from, l, h) * k_row_, n * k_row_);
      if (!v_in_k_)
        std::memcpy(v_.data() + index(to, l, h) * v_row_, v_.data() + index(from, l, h) * v_row_, n * v_row_);
    }
}

}  // namespace colibri
