// Kernel throughput in GB/s of weight bytes: matvec_rows (decode) and
// matmul_rows with 8 and 64 tokens (prefill) for every weight type and ISA, over a
// 64 MB matrix (larger than L2; a large L3 may hold much of it, so decode
// figures from DRAM come from `colibri bench`), packed where the ISA packs
// that type, as the loaders do. Not a test; run it by hand:
//   build/tests/tensor/bench_kernels --benchmark_filter=q4_0
#include <benchmark/benchmark.h>

#include <random>
#include <string>
#include <vector>

#include "bench_weights.h"
#include "tensor/ops.h"

namespace colibri {
namespace {

constexpr int64_t kRowLen = 4096;
constexpr size_t kMatrixBytes = size_t{64} << 20;

struct Matrix {
  std::vector<uint8_t> bytes;
  TensorView view;
};

Matrix make_matrix(DType t) {
  Matrix m;
  // Rows in whole groups of 16, as every model's matrices come: a packed
  // kernel takes only those (a view of 29127 rows would stay plain).
  const int64_t rows = static_cast<int64_t>(kMatrixBytes / row_bytes(t, kRowLen)) / 16 * 16;
  m.bytes.resize(row_bytes(t, kRowLen) * rows);
  // Valid weights: random F32 values quantized where a quantizer exists,
  // random bytes with small fp16 scales otherwise (scale bytes are not read
  // for their value here, only their cost).
  std::mt19937 rng(1);
  fill_bench_weights(t, m.bytes.data(), m.bytes.size(), rng);
  m.view.data = m.bytes.data();
  m.view.type = t;
  m.view.ne[0] = kRowLen;
  m.view.ne[1] = rows;
  return m;
}

void run(benchmark::State& state, DType t, Isa isa, int64_t n_tok) {
  if (!isa_supported(isa)) {
    state.SkipWithError("ISA not supported here");
    return;
  }
  set_kernel_isa(isa);
  Matrix m = make_matrix(t);
  // Packed as the loaders pack it, where this ISA has a packed kernel: a
  // plain view would be packed a group at a time on every call.
  if (packs(t, m.view.n_rows())) {
    pack_rows(t, m.bytes.data(), m.view.n_rows(), kRowLen);
    m.view.packed = true;
  }
  std::mt19937 rng(2);
  std::normal_distribution<float> g;
  std::vector<float> x(kRowLen * n_tok);
  for (auto& v : x) v = g(rng);
  const size_t xs = activation_bytes(t, Precision::kNative, kRowLen);
  std::vector<uint8_t> xq(xs * n_tok);
  for (int64_t k = 0; k < n_tok; ++k)
    quantize_activation(t, Precision::kNative, x.data() + k * kRowLen, xq.data() + k * xs, kRowLen);
  const int64_t rows = m.view.n_rows();
  std::vector<float> y(rows * n_tok), scratch(kRowLen);
  for (auto _ : state) {
    if (n_tok == 1)
      matvec_rows(m.view, Precision::kNative, xq.data(), y.data(), 0, rows, scratch.data());
    else
      matmul_rows(m.view, Precision::kNative, xq.data(), xs, n_tok, y.data(), rows, 0, rows, scratch.data());
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(m.bytes.size()));
}

const int kRegistered = [] {
  for (DType t :
       {DType::F32,     DType::F16,    DType::BF16,   DType::Q8_0,    DType::Q4_0,  DType::Q4_1,
        DType::Q5_0,    DType::Q5_1,   DType::Q2_K,   DType::Q3_K,    DType::Q4_K,  DType::Q5_K,
        DType::Q6_K,    DType::MXFP4,  DType::IQ4_NL, DType::IQ4_XS,  DType::IQ1_S, DType::IQ1_M,
        DType::IQ2_XXS, DType::IQ2_XS, DType::IQ2_S,  DType::IQ3_XXS, DType::IQ3_S})
    for (Isa isa : kAllIsas)
      for (int64_t n_tok : {1, 8, 64}) {
        const std::string name = (n_tok == 1 ? std::string("matvec/") : "matmul" + std::to_string(n_tok) + "/") +
                                 dtype_name(t) + "/" + isa_name(isa);
        benchmark::RegisterBenchmark(name.c_str(), run, t, isa, n_tok)->Unit(benchmark::kMillisecond);
      }
  return 0;
}();

}  // namespace
}  // namespace colibri

BENCHMARK_MAIN();
