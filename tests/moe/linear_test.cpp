// run_products (model/linear.h) splits several products' rows over the thread
// pool in blocks weighted by each product's token count: every row of every
// product is computed exactly once, with the bits matvec_rows gives it alone,
// whatever the pool size, on row counts that are not whole blocks and token
// counts from one (a decode step) to many.
#include "model/linear.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "base/thread_pool.h"
#include "tensor/half.h"
#include "tensor/ops.h"
#include "tensor/quant_blocks.h"

namespace colibri {
namespace {

struct Product {
  std::vector<block_q8_0> w, packed;
  TensorView plain, view;   // view: what run_products reads (plain or packed)
  std::vector<uint8_t> xq;  // its own input (empty: the shared one)
  int n = 0;
  std::vector<float> y;
  size_t y_stride = 0;
};

// rows, tokens (0: the shared input's shared_n), the pool's threads; pack:
// the products whose rows are whole groups are packed as the engine packs
// its weights, the others read plain.
void check(const std::vector<int64_t>& rows, const std::vector<int>& tokens, int shared_n,
           int threads, bool pack) {
  constexpr int64_t kCols = 2048;
  std::mt19937 rng(static_cast<uint32_t>(rows.size() * 7 + threads));
  std::normal_distribution<float> nd(0.f, 1.f);
  const size_t xrb = activation_bytes(DType::Q8_0, Precision::kNative, kCols);
  auto quantized_inputs = [&](int n) {
    std::vector<uint8_t> xq(xrb * n);
    std::vector<float> x(kCols);
    for (int t = 0; t < n; ++t) {
      for (float& v : x) v = nd(rng);
      quantize_activation(DType::Q8_0, Precision::kNative, x.data(), xq.data() + t * xrb, kCols);
    }
    return xq;
  };
  const std::vector<uint8_t> shared = quantized_inputs(shared_n);
  std::vector<Product> ps(rows.size());
  std::vector<float> row(kCols);
  for (size_t i = 0; i < ps.size(); ++i) {
    Product& p = ps[i];
    p.w.resize(static_cast<size_t>(rows[i] * kCols / 32));
    for (int64_t r = 0; r < rows[i]; ++r) {
      for (float& v : row) v = nd(rng);
      fp32_to_q8_0_row(row.data(), p.w.data() + r * kCols / 32, kCols);
    }
    p.plain.data = reinterpret_cast<const uint8_t*>(p.w.data());
    p.plain.type = DType::Q8_0;
    p.plain.ne[0] = kCols;
    p.plain.ne[1] = rows[i];
    p.view = p.plain;
    if (pack && rows[i] % 16 == 0 && packs(DType::Q8_0, rows[i])) {
      p.packed = p.w;
      pack_rows(DType::Q8_0, reinterpret_cast<uint8_t*>(p.packed.data()), rows[i], kCols);
      p.view.data = reinterpret_cast<const uint8_t*>(p.packed.data());
      p.view.packed = true;
    }
    p.n = tokens[i];
    if (p.n) p.xq = quantized_inputs(p.n);
    p.y_stride = static_cast<size_t>(rows[i]) + 3;  // padded
    p.y.assign(p.y_stride * (p.n ? p.n : shared_n), -1.0f);
  }
  std::vector<LinearOut> outs;
  for (Product& p : ps)
    outs.push_back({&p.view, p.y.data(), p.y_stride, p.xq.empty() ? nullptr : p.xq.data(), p.n});
  ThreadPool pool(threads);
  std::vector<float> scratch(static_cast<size_t>(threads) * (kCols + 256));
  run_products(pool, Precision::kNative, outs, shared_n, shared.data(), xrb, scratch.data(),
               kCols + 256);

  std::vector<float> want(kCols);
  for (size_t i = 0; i < ps.size(); ++i) {
    const Product& p = ps[i];
    const int n = p.n ? p.n : shared_n;
    const uint8_t* xq = p.xq.empty() ? shared.data() : p.xq.data();
    for (int t = 0; t < n; ++t) {
      matvec_rows(p.plain, Precision::kNative, xq + t * xrb, want.data(), 0, rows[i],
                  scratch.data());
      for (int64_t r = 0; r < rows[i]; ++r)
        ASSERT_EQ(f32_bits(p.y[t * p.y_stride + r]), f32_bits(want[r]))
            << threads << " threads, product " << i << " token " << t << " row " << r;
      for (size_t r = static_cast<size_t>(rows[i]); r < p.y_stride; ++r)
        ASSERT_EQ(p.y[t * p.y_stride + r], -1.0f) << "padding written: product " << i;
    }
  }
}

TEST(RunProducts, EveryRowOnceWithItsOwnBits) {
  for (int threads : {1, 2, 3})
    for (bool pack : {false, true}) {
      // A prompt's experts: rows off whole blocks, token counts far apart.
      check({37, 16, 50, 5, 64}, {1, 13, 3, 40, 2}, 1, threads, pack);
      // A decode step: one token each, the shared input.
      check({64, 48, 33}, {0, 0, 0}, 1, threads, pack);
      // Dense products of a prompt: the shared input, one count for all.
      check({40, 96}, {0, 0}, 7, threads, pack);
    }
}

}  // namespace
}  // namespace colibri
