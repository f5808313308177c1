// MXFP4's SIMD kernels against the scalar reference, on random and extreme
// blocks (exponents 0..2 with float-subnormal products, 253..255 at the top
// of float's range), odd row counts and token batches; and the MXFP4 tensors
// of a file written by llama.cpp (../shared/golden/gptoss-mxfp4.gguf)
// dequantized against a decoder written here.
//
// At e = 255 (and at 254 with ordinary activations) d_x * 2^(e - 128)
// overflows to infinity, as it does in ggml, which does not special-case
// E8M0's 255: the scalar dot is then +-inf, or NaN where a block's integer
// sum is 0; a SIMD kernel multiplies partial sums (lanes) by that scale and
// may give NaN where the scalar gives inf. Both are non-finite, neither
// crashes, and nothing in the arithmetic is undefined. The NEON dots keep a
// block's whole term in one lane, so there they are the reference's
// non-finite values too.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "formats/gguf.h"
#include "tensor/half.h"
#include "tensor/kernels/dispatch.h"
#include "tensor/quant_blocks.h"

namespace colibri {
namespace {

namespace fs = std::filesystem;

// Every supported ISA but the scalar one: on AArch64 each NEON level (plain,
// sdot, sdot with smmla tiles).
std::vector<Isa> simd_isas() {
  std::vector<Isa> v;
  for (Isa i : kAllIsas)
    if (i != Isa::kScalar && isa_supported(i)) v.push_back(i);
  return v;
}

// The scalar ISA and every SIMD one.
std::vector<Isa> all_isas() {
  std::vector<Isa> v = simd_isas();
  v.insert(v.begin(), Isa::kScalar);
  return v;
}

// Rows of nb blocks, exponents from `exps` at random, codes random or (all_max)
// every code 7 (+12) or 15 (-12) by row parity.
std::vector<block_mxfp4> random_rows(int64_t n_rows, int64_t nb, const std::vector<int>& exps,
                                     bool all_max, std::mt19937& rng) {
  std::uniform_int_distribution<int> byte(0, 255);
  std::vector<block_mxfp4> w(static_cast<size_t>(n_rows * nb));
  for (int64_t r = 0; r < n_rows; ++r)
    for (int64_t b = 0; b < nb; ++b) {
      block_mxfp4& blk = w[r * nb + b];
      blk.e = static_cast<uint8_t>(exps[byte(rng) % exps.size()]);
      for (uint8_t& q : blk.qs)
        q = all_max ? (r % 2 ? 0xFF : 0x77) : static_cast<uint8_t>(byte(rng));
    }
  return w;
}

std::vector<block_q8_0> activations(int64_t n, float scale, std::mt19937& rng) {
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = g(rng) * scale;
  std::vector<block_q8_0> q(static_cast<size_t>(n / kQK));
  ref_kernel_table().quantize[slot(DType::Q8_0)](x.data(), q.data(), n);
  return q;
}

// Sum of |w x| over the row in F64 (from the codes, so weights beyond
// float's range count as what they are): the scale of the float rounding the
// kernels may differ by, and whether anything can overflow.
double abs_sum(const block_mxfp4* w, const block_q8_0* x, int64_t n) {
  double s = 0;
  for (int64_t b = 0; b < n / kQK; ++b) {
    const double d = std::ldexp(1.0, w[b].e - 128) * half_to_float(x[b].d);
    for (int j = 0; j < kQK; ++j) {
      const int code = j < 16 ? w[b].qs[j] & 15 : w[b].qs[j - 16] >> 4;
      s += std::fabs(d * kMxfp4Values[code] * x[b].qs[j]);
    }
  }
  return s;
}

// Each ISA's dot against the scalar one within float rounding, wherever no
// product or partial sum can leave float's range (abs_sum well below
// FLT_MAX); beyond it the kernels only have to run (see the top of the file).
// Returns how many rows were compared.
int check_dots(const std::vector<int>& exps, bool all_max, float x_scale, int seed) {
  std::mt19937 rng(seed);
  const DotFn ref = ref_kernel_table().dot[slot(DType::MXFP4)];
  int compared = 0;
  for (Isa isa : simd_isas()) {
    const DotFn dot = kernel_table(isa).dot[slot(DType::MXFP4)];
    for (int64_t nb : {1, 2, 3, 5, 8, 17, 64, 129}) {
      const int64_t n = nb * kQK;
      const auto w = random_rows(4, nb, exps, all_max, rng);
      const auto x = activations(n, x_scale, rng);
      for (int64_t r = 0; r < 4; ++r) {
        const block_mxfp4* row = w.data() + r * nb;
        const float want = ref(row, x.data(), n), got = dot(row, x.data(), n);
        const double as = abs_sum(row, x.data(), n);
        if (!(as < 0x1p124)) continue;
        EXPECT_TRUE(std::isfinite(want)) << "nb=" << nb;
        // Subnormal partial products round at 2^-149 each, whatever their size.
        EXPECT_NEAR(got, want, 2e-6 * static_cast<double>(nb) * as + 64.0 * nb * 0x1p-149)
            << isa_name(isa) << " nb=" << nb << " row " << r;
        ++compared;
      }
    }
  }
  return compared;
}

TEST(Mxfp4Kernels, EveryIsaMatchesScalarOnRandomBlocks) {
  if (simd_isas().empty()) GTEST_SKIP() << "no SIMD kernels on this CPU";
  std::vector<int> typical;
  for (int e = 110; e <= 135; ++e) typical.push_back(e);
  const int rows = 32 * static_cast<int>(simd_isas().size());
  EXPECT_EQ(check_dots(typical, false, 1.0f, 1), rows);
  EXPECT_EQ(check_dots(typical, true, 1.0f, 2), rows);
}

TEST(Mxfp4Kernels, EveryIsaMatchesScalarAtTheExponentExtremes) {
  if (simd_isas().empty()) GTEST_SKIP() << "no SIMD kernels on this CPU";
  const int rows = 32 * static_cast<int>(simd_isas().size());
  // Float-subnormal scales and products.
  EXPECT_EQ(check_dots({0, 1, 2}, false, 1.0f, 3), rows);
  EXPECT_EQ(check_dots({0, 1, 2}, true, 1.0f, 4), rows);
  EXPECT_EQ(check_dots({0, 1, 2, 120, 127}, false, 1e-3f, 5), rows);
  // The top of the range with activations small enough (d_x near 1e-11)
  // for finite products, though the weights alone (12 x 2^126) are not.
  EXPECT_EQ(check_dots({253, 254}, false, 1e-9f, 6), rows);
  EXPECT_EQ(check_dots({253, 254}, true, 1e-9f, 7), rows);
  // Ordinary activations: these overflow, and only have to run.
  EXPECT_EQ(check_dots({254, 255}, true, 1.0f, 8), 0);
  check_dots({0, 255}, false, 1.0f, 9);
}

// e = 255 with codes +-12: every scalar product overflows; no ISA's product
// is finite, and matmul_rows and matvec_rows both run through them.
TEST(Mxfp4Kernels, TopExponentOverflowsWithoutCrashing) {
  std::mt19937 rng(10);
  const int64_t nb = 4, n = nb * kQK, n_rows = 5, n_tok = 3;
  const auto w = random_rows(n_rows, nb, {255}, true, rng);
  std::vector<block_q8_0> x;
  for (int64_t t = 0; t < n_tok; ++t) {
    const auto xt = activations(n, 1.0f, rng);
    x.insert(x.end(), xt.begin(), xt.end());
  }
  TensorView v;
  v.data = reinterpret_cast<const uint8_t*>(w.data());
  v.type = DType::MXFP4;
  v.ne[0] = n;
  v.ne[1] = n_rows;
  const Isa saved = active_isa();
  for (Isa isa : all_isas()) {
    set_kernel_isa(isa);
    std::vector<float> y(static_cast<size_t>(n_rows * n_tok)), scratch(static_cast<size_t>(n));
    matmul_rows(v, Precision::kNative, x.data(), nb * sizeof(block_q8_0), n_tok, y.data(), n_rows,
                0, n_rows, scratch.data());
    for (float f : y) EXPECT_FALSE(std::isfinite(f)) << isa_name(isa);
    matvec_rows(v, Precision::kNative, x.data(), y.data(), 0, n_rows, scratch.data());
    for (int64_t r = 0; r < n_rows; ++r) EXPECT_FALSE(std::isfinite(y[r])) << isa_name(isa);
  }
  set_kernel_isa(saved);
}

// A block's 32 codes: each of the 16 E2M1 codes twice, in a random order.
void every_code(block_mxfp4& b, std::mt19937& rng) {
  int codes[kQK];
  for (int j = 0; j < kQK; ++j) codes[j] = j % 16;
  std::shuffle(codes, codes + kQK, rng);
  for (int j = 0; j < kQK / 2; ++j)
    b.qs[j] = static_cast<uint8_t>(codes[j] | codes[j + kQK / 2] << 4);
}

bool same_value(float a, float b) {
  return a == b || (std::isnan(a) && std::isnan(b));
}

// Every E8M0 exponent (0 and 1 the denormal scales 2^-128 and 2^-127, 255
// taken as 2^127 as ggml takes it) with every E2M1 code, against activation
// scales from 0 and fp16's smallest subnormal to its largest value: scale
// products that are float subnormals, normal, past float's range and
// infinite (d_x >= 2 at e = 255), times random, extreme (all +127) and zero
// (inf * 0: NaN) block sums. Rows of 1 to 3 blocks: the NEON dots keep one
// block's term a lane, the reference's term to the bit, and add the lanes
// as the reference adds its terms, so they give its value, inf and NaN
// included. The other ISAs match it within rounding where everything stays
// in float's range, and are non-finite where it is not. Every tile gives
// its own dot's value for each (row, token).
TEST(Mxfp4Kernels, EveryExponentAndCodeAsTheReference) {
  if (simd_isas().empty()) GTEST_SKIP() << "no SIMD kernels on this CPU";
  std::mt19937 rng(12);
  const DotFn ref = ref_kernel_table().dot[slot(DType::MXFP4)];
  constexpr int64_t kNb = 3, kRows = 2;
  constexpr uint16_t kActScales[] = {0x0000, 0x0001, 0x0400, 0x1C00, 0x3C00, 0x4000, 0x7BFF};
  constexpr int64_t kTok = std::size(kActScales);
  std::uniform_int_distribution<int> q(-127, 127);
  std::vector<block_q8_0> x(static_cast<size_t>(kTok * kNb));
  for (int64_t t = 0; t < kTok; ++t)
    for (int64_t b = 0; b < kNb; ++b) {
      block_q8_0& blk = x[t * kNb + b];
      blk.d = kActScales[t];
      for (int8_t& v : blk.qs) v = static_cast<int8_t>(b == 0 ? q(rng) : b == 1 ? 127 : 0);
    }
  int non_finite = 0;
  for (int e = 0; e < 256; ++e) {
    std::vector<block_mxfp4> w(static_cast<size_t>(kRows * kNb));
    for (block_mxfp4& b : w) {
      b.e = static_cast<uint8_t>(e);
      every_code(b, rng);
    }
    for (Isa isa : simd_isas()) {
      const KernelTable& k = kernel_table(isa);
      const bool neon = isa == Isa::kNeon || isa == Isa::kNeonDot || isa == Isa::kNeonI8mm;
      for (int64_t nb = 1; nb <= kNb; ++nb)
        for (int64_t r = 0; r < kRows; ++r)
          for (int64_t t = 0; t < kTok; ++t) {
            const block_mxfp4* row = w.data() + r * kNb;
            const block_q8_0* xt = x.data() + t * kNb;
            const float want = ref(row, xt, nb * kQK),
                        got = k.dot[slot(DType::MXFP4)](row, xt, nb * kQK);
            const double as = abs_sum(row, xt, nb * kQK);
            if (neon) {
              EXPECT_TRUE(same_value(got, want))
                  << isa_name(isa) << " e=" << e << " d_x=" << half_to_float(kActScales[t])
                  << " nb=" << nb << ": " << got << ", reference " << want;
              non_finite += std::isfinite(want) ? 0 : 1;
            } else if (!std::isfinite(want)) {
              EXPECT_FALSE(std::isfinite(got))
                  << isa_name(isa) << " e=" << e << " t=" << t << " nb=" << nb;
            } else if (as < 0x1p124) {
              EXPECT_NEAR(got, want, 2e-6 * static_cast<double>(nb) * as + 64.0 * nb * 0x1p-149)
                  << isa_name(isa) << " e=" << e << " t=" << t << " nb=" << nb;
            }
          }
      const TileFn tile = k.tile[slot(DType::MXFP4)];
      if (tile == nullptr) continue;
      std::vector<float> y(static_cast<size_t>(kRows * kTok));
      tile(reinterpret_cast<const uint8_t*>(w.data()), kNb * sizeof(block_mxfp4), kRows,
           reinterpret_cast<const uint8_t*>(x.data()), kNb * sizeof(block_q8_0), kTok, kNb * kQK,
           y.data(), kRows);
      for (int64_t r = 0; r < kRows; ++r)
        for (int64_t t = 0; t < kTok; ++t) {
          const float dot =
              k.dot[slot(DType::MXFP4)](w.data() + r * kNb, x.data() + t * kNb, kNb * kQK);
          EXPECT_TRUE(same_value(y[t * kRows + r], dot))
              << isa_name(isa) << " e=" << e << " row " << r << " tok " << t;
        }
    }
  }
  // The non-finite cases are there (e = 254 and 255 against the large d_x).
  if (isa_supported(Isa::kNeon)) {
    EXPECT_GT(non_finite, 0);
  }
}

// Prefill (matmul_rows) on odd row ranges and batch sizes equals the ISA's
// own matvec per token bit for bit, and the scalar dot within rounding.
TEST(Mxfp4Kernels, MatmulOnOddShapesEqualsMatvecAndScalar) {
  std::mt19937 rng(11);
  std::vector<int> exps;
  for (int e = 112; e <= 132; ++e) exps.push_back(e);
  const Isa saved = active_isa();
  const DotFn ref = ref_kernel_table().dot[slot(DType::MXFP4)];
  for (Isa isa : all_isas()) {
    set_kernel_isa(isa);
    for (int64_t nb : {1, 3, 70}) {
      const int64_t n = nb * kQK, n_rows = 23;
      const auto w = random_rows(n_rows, nb, exps, false, rng);
      TensorView v;
      v.data = reinterpret_cast<const uint8_t*>(w.data());
      v.type = DType::MXFP4;
      v.ne[0] = n;
      v.ne[1] = n_rows;
      for (int64_t n_tok : {1, 2, 3, 7, 9, 33}) {
        std::vector<block_q8_0> x;
        for (int64_t t = 0; t < n_tok; ++t) {
          const auto xt = activations(n, 1.0f, rng);
          x.insert(x.end(), xt.begin(), xt.end());
        }
        const size_t xs = nb * sizeof(block_q8_0);
        const int64_t r0 = 1, r1 = n_rows - 3;  // 19 rows from an odd offset
        std::vector<float> y(static_cast<size_t>((r1 - r0) * n_tok)), want(r1 - r0), scratch(n);
        matmul_rows(v, Precision::kNative, x.data(), xs, n_tok, y.data(), r1 - r0, r0, r1,
                    scratch.data());
        for (int64_t t = 0; t < n_tok; ++t) {
          const block_q8_0* xt = x.data() + t * nb;
          matvec_rows(v, Precision::kNative, xt, want.data(), r0, r1, scratch.data());
          for (int64_t r = 0; r < r1 - r0; ++r) {
            const float got = y[t * (r1 - r0) + r];
            ASSERT_EQ(f32_bits(got), f32_bits(want[r]))
                << isa_name(isa) << " tok " << t << " row " << r;
            const block_mxfp4* row = w.data() + (r0 + r) * nb;
            ASSERT_NEAR(got, ref(row, xt, n), 2e-6 * static_cast<double>(nb) * abs_sum(row, xt, n))
                << isa_name(isa) << " nb=" << nb << " tok " << t << " row " << r;
          }
        }
      }
    }
  }
  set_kernel_isa(saved);
}

// The decoder of this file: the E2M1 value of each code (bit 3 the sign,
// bits 2..1 the exponent, bit 0 the mantissa) times 2^(e - 127).
float decode(uint8_t e, int code) {
  const int ex = (code >> 1) & 3, m = code & 1;
  const float mag = ex == 0 ? 0.5f * m : std::ldexp(1.0f + 0.5f * m, ex - 1);
  const float v = std::ldexp(mag, e - 127);
  return code & 8 ? -v : v;
}

// llama-quantize MXFP4_MOE wrote every ffn_*_exps.weight of this file in
// MXFP4 (12 tensors of 128 x 128 x 16, ../shared/golden/README.md): each row
// dequantizes to the values the decoder above gives, bit for bit (the file's
// "-0" codes to +0).
TEST(Mxfp4Kernels, GoldenFileTensorsDecodeAsTheSpecSays) {
  const fs::path p = fs::path(COLIBRI_SHARED_DIR) / "golden" / "gptoss-mxfp4.gguf";
  if (!fs::exists(p)) GTEST_SKIP() << p << " not present";
  const auto file = GgufFile::open(p.string());
  int n_tensors = 0;
  int64_t n_values = 0;
  std::vector<float> row;
  for (const GgufTensor& t : file->tensors()) {
    const bool exps = t.name.find("_exps.weight") != std::string::npos;
    EXPECT_EQ(t.type == DType::MXFP4, exps) << t.name;
    if (t.type != DType::MXFP4) continue;
    ++n_tensors;
    const TensorView v = file->view(t);
    const int64_t n = v.ne[0];
    row.resize(static_cast<size_t>(n));
    for (int64_t r = 0; r < v.n_rows(); ++r) {
      dequantize_row(DType::MXFP4, v.row(r), row.data(), n);
      const auto* b = reinterpret_cast<const block_mxfp4*>(v.row(r));
      for (int64_t i = 0; i < n; ++i) {
        const block_mxfp4& blk = b[i / kQK];
        const int j = static_cast<int>(i % kQK);
        const int code = j < 16 ? blk.qs[j] & 15 : blk.qs[j - 16] >> 4;
        const float want = decode(blk.e, code);
        ASSERT_EQ(row[i], want) << t.name << " row " << r << " col " << i;
        ASSERT_TRUE(want != 0.0f || f32_bits(row[i]) == 0)
            << t.name << " row " << r << " col " << i;
        ASSERT_TRUE(std::isfinite(row[i])) << t.name;
      }
      n_values += n;
    }
  }
  EXPECT_EQ(n_tensors, 12);
  EXPECT_EQ(n_values, 3145728);
}

}  // namespace
}  // namespace colibri
