// Decode kernels streaming weights from DRAM on the thread pool, against the
// bandwidth probe's loads-only kernel (read_sum) on the same bytes split the
// same way: which share of the memory rate a job of a given size keeps, with
// the arithmetic and without. Not a test; run it by hand:
//   build/tests/tensor/bench_stream [type] [rows] [cols] [threads] [MiB]
// e.g. `bench_stream q4_0 1024 2048 2` (OLMoE's expert matrices): jobs of 1,
// 2, 8, 24 and 96 matrices (one matrix, ..., the gates and ups of a layer's 8
// experts, all three) over 1 GiB of them, each matrix read once per pass,
// from 4 KiB pages and from a copy in 2 MiB pages (MADV_HUGEPAGE), the two
// alternating pass by pass, medians of 5.
#include <sys/mman.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "base/aligned_buffer.h"
#include "base/sys.h"
#include "base/thread_pool.h"
#include "tensor/ops.h"

namespace colibri {
namespace {
DType parse_type(const char* s) {
  for (DType t : {DType::Q4_0, DType::Q8_0, DType::Q4_K, DType::Q6_K, DType::MXFP4, DType::Q5_0})
    if (std::string(dtype_name(t)) == s) return t;
  std::fprintf(stderr, "unknown type %s\n", s);
  std::exit(2);
}

int run(int argc, char** argv) {
  const DType type = parse_type(argc > 1 ? argv[1] : "q4_0");
  const int64_t rows = argc > 2 ? std::atoll(argv[2]) : 1024,
                cols = argc > 3 ? std::atoll(argv[3]) : 2048;
  const int threads = argc > 4 ? std::atoi(argv[4]) : 2;
  const size_t total = (argc > 5 ? std::atoll(argv[5]) : 1024) << 20;
  const size_t mat_bytes = row_bytes(type, cols) * static_cast<size_t>(rows);
  const int64_t n_mat = static_cast<int64_t>(total / mat_bytes);
  AlignedBuffer<uint8_t> buf(mat_bytes * n_mat);
  // The copy in transparent huge pages, aligned to 2 MiB.
  AlignedBuffer<uint8_t> hbuf(mat_bytes * n_mat + (4 << 20));
  uint8_t* hb = reinterpret_cast<uint8_t*>(
      (reinterpret_cast<uintptr_t>(hbuf.data()) + (2 << 20) - 1) / (2 << 20) * (2 << 20));
  madvise(hb, mat_bytes * n_mat / (2 << 20) * (2 << 20), MADV_HUGEPAGE);
  std::mt19937 rng(1);
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<uint8_t>(rng() & 0x3B);
  const bool packed = packs(type, rows);
  if (packed)
    for (int64_t m = 0; m < n_mat; ++m) pack_rows(type, buf.data() + m * mat_bytes, rows, cols);
  std::memcpy(hb, buf.data(), mat_bytes * n_mat);
  std::vector<TensorView> hviews(n_mat);
  for (int64_t m = 0; m < n_mat; ++m) {
    hviews[m].data = hb + m * mat_bytes;
    hviews[m].type = type;
    hviews[m].ne[0] = cols;
    hviews[m].ne[1] = rows;
    hviews[m].packed = packed;
  }
  std::vector<TensorView> views(n_mat);
  for (int64_t m = 0; m < n_mat; ++m) {
    views[m].data = buf.data() + m * mat_bytes;
    views[m].type = type;
    views[m].ne[0] = cols;
    views[m].ne[1] = rows;
    views[m].packed = packed;
  }
  std::vector<float> x(cols);
  std::normal_distribution<float> g;
  for (float& v : x) v = g(rng);
  std::vector<uint8_t> xq(activation_bytes(type, Precision::kNative, cols) + 64);
  quantize_activation(type, Precision::kNative, x.data(), xq.data(), cols);
  std::vector<float> y(static_cast<size_t>(rows) * 64);
  std::vector<float> scratch(static_cast<size_t>(threads) * (cols + 256));
  std::vector<uint64_t> sums(threads);
  ThreadPool pool(threads);

  std::printf("%s %lld x %lld (%.2f MB a matrix, %s), %d threads, %lld matrices (%.0f MB)\n",
              dtype_name(type), static_cast<long long>(rows), static_cast<long long>(cols),
              mat_bytes / 1e6, packed ? "packed" : "plain", threads, static_cast<long long>(n_mat),
              buf.size() / 1e6);
  std::printf(
      "| matrices a job | MB a job | pages | kernel GB/s | loads-only GB/s | kernel / loads |\n"
      "|---|---|---|---|---|---|\n");
  for (int per_job : {1, 2, 8, 24, 96}) {
    if (per_job > n_mat) break;
    const int64_t jobs = n_mat / per_job;
    // One pass: every job in turn, its matrices' rows split over the pool in
    // 16-row chunks as model/linear.h splits them.
    bool huge = false;
    auto pass = [&](bool loads_only) {
      const double t0 = now_seconds();
      for (int64_t j = 0; j < jobs; ++j) {
        const TensorView* v = (huge ? hviews.data() : views.data()) + j * per_job;
        pool.parallel_for(rows * per_job, 16, [&](int64_t b, int64_t e, int th) {
          for (int64_t r = b; r < e;) {
            const int64_t m = r / rows, r0 = r % rows, r1 = std::min(rows, r0 + (e - r));
            if (loads_only) {
              const size_t rb = row_bytes(type, cols);
              // Whole 256-byte steps of the rows' bytes (read_sum's unit).
              const size_t bytes = (r1 - r0) * rb / 256 * 256;
              sums[th] += read_sum(static_cast<const uint8_t*>(v[m].data) + r0 * rb, bytes);
            } else {
              matvec_rows(v[m], Precision::kNative, xq.data(), y.data() + r0, r0, r1,
                          scratch.data() + th * (cols + 256));
            }
            r += r1 - r0;
          }
        });
      }
      return static_cast<double>(jobs * per_job * mat_bytes) / (now_seconds() - t0) / 1e9;
    };
    std::vector<double> k[2], l[2];
    for (int r = 0; r < 5; ++r)
      for (int h = 0; h < 2; ++h) {
        huge = h == 1;
        k[h].push_back(pass(false));
        l[h].push_back(pass(true));
      }
    for (int h = 0; h < 2; ++h) {
      std::sort(k[h].begin(), k[h].end());
      std::sort(l[h].begin(), l[h].end());
      std::printf("| %d | %.2f | %s | %.1f | %.1f | %.1f%% |\n", per_job, per_job * mat_bytes / 1e6,
                  h ? "2 MiB" : "4 KiB", k[h][2], l[h][2], 100.0 * k[h][2] / l[h][2]);
    }
  }
  uint64_t s = 0;
  for (uint64_t v : sums) s += v;
  std::printf("(checksum %llu, y %g)\n", static_cast<unsigned long long>(s),
              static_cast<double>(y[0]));
  return 0;
}

}  // namespace
}  // namespace colibri

int main(int argc, char** argv) {
  return colibri::run(argc, argv);
}
