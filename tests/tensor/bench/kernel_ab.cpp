// Two builds of the packed x86 kernels in one binary (bench/kernel_ab.sh makes
// them from two versions of kernels/x86/avx512_packed.cpp), run pass by pass
// in turn over the same packed matrices, with a loads-only pass (read_sum)
// over the same bytes beside them: on a host whose memory bandwidth moves by
// a third minute to minute, alternating binaries cannot separate a few
// percent, alternating passes can. Not a test; run it through the script:
//   kernel_ab TYPE ROWS COLS MIB [TOKENS] [THREADS] [PASSES] [huge]
// (huge: the matrices in 2 MiB pages, as the engine's expert slots are) prints each build's median
// GB/s of weights, B over A, and whether their outputs are the same bits.
#include <sys/mman.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "base/sys.h"
#include "base/thread_pool.h"
#include "bench_weights.h"
#include "tensor/ops.h"
#include "tensor/quant_blocks.h"

namespace colibri {

// Defined by the two renamed copies of the kernel file the script compiles.
using PackedRun = void (*)(DType, const uint8_t*, int64_t, const uint8_t*, size_t, int64_t, int64_t,
                           float*, size_t);
void kernel_ab_a(DType, const uint8_t*, int64_t, const uint8_t*, size_t, int64_t, int64_t, float*,
                 size_t);
void kernel_ab_b(DType, const uint8_t*, int64_t, const uint8_t*, size_t, int64_t, int64_t, float*,
                 size_t);

namespace {

int run(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr,
                 "usage: kernel_ab TYPE ROWS COLS MIB [TOKENS] [THREADS] [PASSES] [huge]\n");
    return 2;
  }
  DType type = DType::F32;
  for (DType t : {DType::Q4_0, DType::Q8_0, DType::MXFP4, DType::Q5_0, DType::Q4_K, DType::Q6_K})
    if (dtype_name(t) == std::string(argv[1])) type = t;
  if (type == DType::F32) {
    std::fprintf(stderr, "type %s: one of q4_0, q8_0, mxfp4, q5_0, q4_K, q6_K\n", argv[1]);
    return 2;
  }
  const bool k_quant = type == DType::Q4_K || type == DType::Q6_K;
  const int64_t rows = std::atoll(argv[2]), cols = std::atoll(argv[3]);
  const double mib = std::atof(argv[4]);
  const int64_t nt = argc > 5 ? std::atoll(argv[5]) : 1;
  const int threads = argc > 6 ? std::atoi(argv[6]) : 1;
  const int passes = argc > 7 ? std::atoi(argv[7]) : 10;
  if (rows % 16 != 0 || cols % (k_quant ? 256 : 32) != 0 || nt < 1 || threads < 1 || passes < 1) {
    std::fprintf(
        stderr,
        "rows a multiple of 16, cols of 32 (k-quants: 256), tokens, threads, passes >= 1\n");
    return 2;
  }
  const size_t mat = row_bytes(type, cols) * static_cast<size_t>(rows);
  const int64_t n_mat = std::max<int64_t>(1, static_cast<int64_t>(mib * (1 << 20) / mat));
  const bool huge = argc > 8 && std::string(argv[8]) == "huge";
  const size_t bytes = mat * n_mat;
  auto* wp = static_cast<uint8_t*>(map_anonymous(bytes, huge));
  if (!wp) {
    std::fprintf(stderr, "cannot map %zu bytes\n", bytes);
    return 2;
  }
  struct Unmap {
    void* p;
    size_t n;
    ~Unmap() { munmap(p, n); }
  } unmap{wp, bytes};
  std::mt19937 rng(1);
  fill_bench_weights(type, wp, bytes, rng);
  for (int64_t m = 0; m < n_mat; ++m) pack_rows(type, wp + m * mat, rows, cols);
  // The activations, random floats quantized to the weight type's dot type
  // (q8_0 blocks, or q8_K with their sums for the k-quants).
  const size_t x_stride = activation_bytes(type, Precision::kNative, cols);
  std::vector<uint8_t> x(x_stride * static_cast<size_t>(nt));
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> xf(static_cast<size_t>(cols));
  for (int64_t t = 0; t < nt; ++t) {
    for (float& v : xf) v = nd(rng);
    quantize_activation(type, Precision::kNative, xf.data(), x.data() + t * x_stride, cols);
  }
  const size_t ys = static_cast<size_t>(rows * nt);
  std::vector<float> y[2] = {std::vector<float>(ys * n_mat), std::vector<float>(ys * n_mat)};
  const PackedRun fn[2] = {kernel_ab_a, kernel_ab_b};
  std::vector<uint64_t> sums(threads);
  ThreadPool pool(threads);

  // Variant 0 and 1: the builds; 2: loads only. Matrices split over threads.
  auto pass = [&](int v) {
    const double t0 = now_seconds();
    pool.parallel_for(n_mat, 1, [&](int64_t b, int64_t e, int th) {
      for (int64_t m = b; m < e; ++m) {
        const uint8_t* p = wp + m * mat;
        if (v == 2)
          sums[th] += read_sum(p, mat / 256 * 256);
        else
          fn[v](type, p, rows / 16, x.data(), x_stride, nt, cols, y[v].data() + m * ys,
                static_cast<size_t>(rows));
      }
    });
    return static_cast<double>(mat * n_mat) / (now_seconds() - t0) / 1e9;
  };
  std::vector<double> rate[3];
  for (int r = 0; r <= passes; ++r)
    for (int v = 0; v < 3; ++v) {
      const double g = pass(v);
      if (r > 0) rate[v].push_back(g);  // the first round warms up
    }
  double med[3];
  for (int v = 0; v < 3; ++v) {
    std::sort(rate[v].begin(), rate[v].end());
    med[v] = rate[v][rate[v].size() / 2];
  }
  const bool same = std::memcmp(y[0].data(), y[1].data(), y[0].size() * sizeof(float)) == 0;
  std::printf(
      "%s %lld x %lld, %lld matrices (%.1f MiB%s), %lld tokens, %d threads, medians of %d: "
      "A %.1f GB/s, B %.1f GB/s, B/A %.3f, loads-only %.1f GB/s; outputs %s\n",
      argv[1], static_cast<long long>(rows), static_cast<long long>(cols),
      static_cast<long long>(n_mat), mat * n_mat / 1048576.0, huge ? ", 2 MiB pages" : "",
      static_cast<long long>(nt), threads, passes, med[0], med[1], med[1] / med[0], med[2],
      same ? "the same bits" : "DIFFER");
  return same ? 0 : 1;
}

}  // namespace
}  // namespace colibri

int main(int argc, char** argv) {
  return colibri::run(argc, argv);
}
