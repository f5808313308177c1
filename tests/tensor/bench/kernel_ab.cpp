// Two builds of the packed x86 kernels in one binary (bench/kernel_ab.sh makes
// them from two versions of kernels/x86/avx512_packed.cpp), run pass by pass
// in turn over the same packed matrices, with a loads-only pass (read_sum)
// over the same bytes beside them: on a host whose memory bandwidth moves by
// a third minute to minute, alternating binaries cannot separate a few
// percent, alternating passes can. Not a test; run it through the script:
//   kernel_ab TYPE ROWS COLS MIB [TOKENS] [THREADS] [PASSES] [huge] [split]
// (huge: the matrices in 2 MiB pages, as the engine's expert slots are;
// split: each matrix's groups split over the threads, as the engine splits a
// decode step's products, instead of whole matrices a thread) prints each
// build's median GB/s of weights, B over A, and whether their outputs are the
// same bits.
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
#include "tensor/kernels/kernel_table.h"
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
// Their kernel tables (add_avx512_packed_kernels): each build packs its own
// copy of the weights, so two builds of different layouts run on theirs.
void kernel_ab_a_add(KernelTable&);
void kernel_ab_b_add(KernelTable&);

namespace {

int run(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(
        stderr, "usage: kernel_ab TYPE ROWS COLS MIB [TOKENS] [THREADS] [PASSES] [huge] [split]\n");
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
  bool huge = false, split = false;
  for (int a = 8; a < argc; ++a) {
    huge |= std::string(argv[a]) == "huge";
    split |= std::string(argv[a]) == "split";
  }
  const size_t bytes = mat * n_mat;
  struct Unmap {
    void* p;
    size_t n;
    ~Unmap() {
      if (p) munmap(p, n);
    }
  } unmap[2] = {{map_anonymous(bytes, huge), bytes}, {map_anonymous(bytes, huge), bytes}};
  if (!unmap[0].p || !unmap[1].p) {
    std::fprintf(stderr, "cannot map 2 x %zu bytes\n", bytes);
    return 2;
  }
  uint8_t* const wv[2] = {static_cast<uint8_t*>(unmap[0].p), static_cast<uint8_t*>(unmap[1].p)};
  std::mt19937 rng(1);
  fill_bench_weights(type, wv[0], bytes, rng);
  // The same rows, packed by each build into its copy (B's from A's plain
  // bytes, then A's in place through a group-sized buffer).
  KernelTable tables[2];
  kernel_ab_a_add(tables[0]);
  kernel_ab_b_add(tables[1]);
  for (const KernelTable& t : tables)
    if (!t.pack_group[slot(type)]) {
      std::fprintf(stderr, "a build without a packing of %s\n", argv[1]);
      return 2;
    }
  const size_t rb = row_bytes(type, cols), gb = 16 * rb;
  std::vector<uint8_t> plain(gb);
  for (int v : {1, 0})
    for (size_t at = 0; at < bytes; at += gb) {
      std::memcpy(plain.data(), wv[0] + at, gb);
      tables[v].pack_group[slot(type)](plain.data(), rb, 16, wv[v] + at, cols);
    }
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

  // Variant 0 and 1: the builds; 2: loads only. Matrices split over threads,
  // or (split) each matrix's groups.
  const int64_t groups = rows / 16;
  const size_t group_bytes = mat / static_cast<size_t>(groups);
  auto pass = [&](int v) {
    const double t0 = now_seconds();
    if (split) {
      for (int64_t m = 0; m < n_mat; ++m)
        pool.parallel_for(groups, 1, [&](int64_t b, int64_t e, int th) {
          const uint8_t* p = wv[v & 1] + m * mat + b * group_bytes;
          if (v == 2)
            sums[th] += read_sum(p, (e - b) * group_bytes / 256 * 256);
          else
            fn[v](type, p, e - b, x.data(), x_stride, nt, cols, y[v].data() + m * ys + b * 16,
                  static_cast<size_t>(rows));
        });
      return static_cast<double>(mat * n_mat) / (now_seconds() - t0) / 1e9;
    }
    pool.parallel_for(n_mat, 1, [&](int64_t b, int64_t e, int th) {
      for (int64_t m = b; m < e; ++m) {
        const uint8_t* p = wv[v & 1] + m * mat;
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
      "%s %lld x %lld, %lld matrices (%.1f MiB%s%s), %lld tokens, %d threads, medians of %d: "
      "A %.1f GB/s, B %.1f GB/s, B/A %.3f, loads-only %.1f GB/s; outputs %s\n",
      argv[1], static_cast<long long>(rows), static_cast<long long>(cols),
      static_cast<long long>(n_mat), mat * n_mat / 1048576.0, huge ? ", 2 MiB pages" : "",
      split ? ", each split over the threads" : "", static_cast<long long>(nt), threads, passes,
      med[0], med[1], med[1] / med[0], med[2], same ? "the same bits" : "DIFFER");
  return same ? 0 : 1;
}

}  // namespace
}  // namespace colibri

int main(int argc, char** argv) {
  return colibri::run(argc, argv);
}
