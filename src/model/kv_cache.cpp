#include "model/kv_cache.h"

#include <cstring>

#include "base/sys.h"
#include "tensor/ops.h"

namespace colibri {

size_t KVCache::element_bytes(DType type) {
  CLB_CHECK(type == DType::F16 || type == DType::F32, "the KV cache is stored as f16 or f32, not %s",
            dtype_info(type).name);
  return type == DType::F16 ? 2 : 4;
}

KVCache::KVCache(const ModelConfig& c, int n_ctx, int n_seq, DType type)
    : n_layer_(c.n_layer), n_head_kv_(c.n_head_kv), n_ctx_(n_ctx), n_seq_(n_seq), hd_k_(c.head_dim),
      hd_v_(c.head_dim_v), v_in_k_(c.is_mla()), type_(type), elem_(element_bytes(type)) {
  CLB_CHECK(n_ctx > 0 && n_seq > 0, "context size %d and sequence count %d must be positive", n_ctx,
            n_seq);
  const size_t rows = static_cast<size_t>(n_seq) * n_layer_ * n_head_kv_ * n_ctx;
  k_.resize(rows * hd_k_ * elem_);
  if (!v_in_k_) v_.resize(rows * hd_v_ * elem_);
  mark_.assign(n_seq, 0);
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
        bytes += pages(row * hd_k_ * elem_, static_cast<uint64_t>(mark_[seq]) * hd_k_ * elem_);
        if (!v_in_k_) bytes += pages(row * hd_v_ * elem_, static_cast<uint64_t>(mark_[seq]) * hd_v_ * elem_);
      }
  }
  if (bytes <= touched_) return;
  touched_ = bytes;
  if (listener_) listener_(bytes);
}

namespace {
void store_row(const float* src, size_t n, DType type, uint8_t* dst) {
  if (type == DType::F32) {
    std::memcpy(dst, src, n * sizeof(float));
    return;
  }
  fp32_to_fp16_row(src, reinterpret_cast<uint16_t*>(dst), static_cast<int64_t>(n));
}
}  // namespace

void KVCache::write(int seq, int l, int pos, const float* k, const float* v) {
  CLB_ASSERT(seq < n_seq_ && pos < n_ctx_);
  for (int h = 0; h < n_head_kv_; ++h) {
    store_row(k + h * hd_k_, hd_k_, type_, k_.data() + index(seq, l, h, pos) * hd_k_ * elem_);
    if (!v_in_k_) store_row(v + h * hd_v_, hd_v_, type_, v_.data() + index(seq, l, h, pos) * hd_v_ * elem_);
  }
}

void KVCache::copy_prefix(int from, int to, int n) {
  CLB_ASSERT(n <= n_ctx_ && from < n_seq_ && to < n_seq_);
  if (from == to || n <= 0) return;
  will_write(to, n);
  commit_growth();
  for (int l = 0; l < n_layer_; ++l)
    for (int h = 0; h < n_head_kv_; ++h) {
      std::memcpy(k_.data() + index(to, l, h) * hd_k_ * elem_, k_.data() + index(from, l, h) * hd_k_ * elem_,
                  n * hd_k_ * elem_);
      if (!v_in_k_)
        std::memcpy(v_.data() + index(to, l, h) * hd_v_ * elem_, v_.data() + index(from, l, h) * hd_v_ * elem_,
                    n * hd_v_ * elem_);
    }
}

}  // namespace colibri
