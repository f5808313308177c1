// The KV cache's memory that follows the context (model/kv_cache.h): marks
// move in steps of kMarkRows, the listener hears the bytes of the pages below
// them before any is made present, commit_growth leaves exactly those pages
// resident (mincore) and none above them, and rows read back as written.
#include "model/kv_cache.h"

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstdint>
#include <vector>

#include "base/sys.h"
#include "model/arch.h"
#include "model/config.h"
#include "tensor/ops.h"

namespace colibri {
namespace {

// Whether every page of [p, p + bytes) is resident.
bool resident(const void* p, size_t bytes) {
  const size_t page = page_size();
  const auto a = reinterpret_cast<uintptr_t>(p);
  const uintptr_t begin = a / page * page, end = (a + bytes + page - 1) / page * page;
  std::vector<unsigned char> v((end - begin) / page);
  if (mincore(reinterpret_cast<void*>(begin), end - begin, v.data()) != 0) return false;
  for (unsigned char c : v)
    if (!(c & 1)) return false;
  return true;
}

TEST(KvCache, PagesBelowTheMarksArePresentAndCountedBeforeAnyWrite) {
  ModelConfig c;
  c.arch = find_arch("qwen3moe");
  ASSERT_NE(c.arch, nullptr);
  c.n_layer = 3;
  c.n_head_kv = 2;
  c.head_dim = c.head_dim_v = 128;  // F16 rows of 256 bytes
  const int n_ctx = 4096;
  KVCache kv(c, n_ctx, 2, DType::F16);
  const size_t row = 256, page = page_size();
  std::vector<uint64_t> heard;
  const uint16_t* new_row = nullptr;  // a row the next commit makes present
  kv.set_growth_listener([&](uint64_t bytes) {
    // The listener hears of the room first, before the pages are there.
    if (new_row) {
      EXPECT_FALSE(resident(new_row, row)) << bytes;
    }
    heard.push_back(bytes);
  });
  const size_t blocks = static_cast<size_t>(c.n_layer) * c.n_head_kv * 2;  // keys and values
  auto pages_below = [&](int rows) { return (rows * row + page - 1) / page * page; };

  // Position 0 of sequence 1: a whole step of kMarkRows is counted and present.
  kv.will_write(1, 1);
  new_row = kv.k<uint16_t>(1, 2, 1);
  kv.commit_growth();
  ASSERT_EQ(heard.size(), 1u);
  EXPECT_EQ(heard.back(), blocks * pages_below(KVCache::kMarkRows));
  for (int l = 0; l < c.n_layer; ++l)
    for (int h = 0; h < c.n_head_kv; ++h) {
      EXPECT_TRUE(resident(kv.k<uint16_t>(1, l, h), KVCache::kMarkRows * row)) << l << " " << h;
      EXPECT_TRUE(resident(kv.v<uint16_t>(1, l, h), KVCache::kMarkRows * row)) << l << " " << h;
      // The next step's rows start on a page of their own (64 x 256 bytes is
      // a whole number of 4, 16 or 64 KiB pages only for 4 and 16).
      if (KVCache::kMarkRows * row % page == 0) {
        EXPECT_FALSE(resident(kv.k<uint16_t>(1, l, h) + KVCache::kMarkRows * 128, row))
            << l << " " << h;
      }
    }
  // Sequence 0 was not marked: none of its pages is there.
  EXPECT_FALSE(resident(kv.k<uint16_t>(0, 0, 0), row));

  // Rows inside the step add nothing; the next step adds its pages.
  kv.will_write(1, KVCache::kMarkRows);
  kv.commit_growth();
  EXPECT_EQ(heard.size(), 1u);
  kv.will_write(1, KVCache::kMarkRows + 1);
  new_row = kv.k<uint16_t>(1, 0, 0) + (2 * KVCache::kMarkRows - 1) * 128;
  kv.commit_growth();
  ASSERT_EQ(heard.size(), 2u);
  EXPECT_EQ(heard.back(), blocks * pages_below(2 * KVCache::kMarkRows));
  EXPECT_TRUE(resident(kv.v<uint16_t>(1, 2, 1), 2 * KVCache::kMarkRows * row));

  // The last step stops at the context's end.
  kv.will_write(0, n_ctx);
  new_row = kv.v<uint16_t>(0, 1, 0) + (n_ctx - 1) * 128;
  kv.commit_growth();
  EXPECT_EQ(heard.back(), blocks * (pages_below(2 * KVCache::kMarkRows) + pages_below(n_ctx)));
  EXPECT_TRUE(resident(kv.k<uint16_t>(0, 2, 1), static_cast<size_t>(n_ctx) * row));

  // What is written reads back (F16 holds these values exactly).
  std::vector<float> k(c.n_head_kv * 128), v(k.size());
  for (size_t i = 0; i < k.size(); ++i)
    k[i] = static_cast<float>(i) / 8, v[i] = -static_cast<float>(i);
  kv.write(1, 2, 70, k.data(), v.data());
  for (int h = 0; h < c.n_head_kv; ++h)
    for (int i = 0; i < 128; ++i) {
      EXPECT_EQ(fp16_to_fp32(kv.k<uint16_t>(1, 2, h)[70 * kv.k_stride() + i]), k[h * 128 + i]);
      EXPECT_EQ(fp16_to_fp32(kv.v<uint16_t>(1, 2, h)[70 * kv.v_stride() + i]), v[h * 128 + i]);
    }
}

}  // namespace
}  // namespace colibri
