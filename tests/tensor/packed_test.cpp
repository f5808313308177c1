// Packed row groups (kernels/ref/packed.cpp): the layout round-trips, every
// ISA's packing writes it byte for byte, the scalar packed kernels agree with
// the plain reference dot, every ISA's packed kernel equals the scalar packed
// kernel bit for bit (for mxfp4 also at every E8M0 exponent and E2M1 code),
// products through ops.h give the same bits whether the weights were packed
// or not, for matvec and matmul, any token count and row ranges on group
// boundaries, and what a kernel keeps within an input epoch never outlives
// the input's bytes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <random>
#include <vector>

#include "tensor/half.h"
#include "tensor/kernels/dispatch.h"
#include "tensor/kernels/kernel_table.h"
#include "tensor/kernels/ref/ref.h"
#include "tensor/quant_blocks.h"
#include "tensor_test_util.h"

namespace colibri {
namespace {

constexpr DType kPackedTypes[] = {DType::Q4_0, DType::Q5_0, DType::Q8_0, DType::Q4_K,
                                  DType::Q6_K, DType::MXFP4, DType::IQ4_XS};

// Row lengths for type t: `common` (multiples of 256), and for the
// 32-element block types also 3, 5 and 90 blocks (GPT-OSS's 2880), whose
// last unit of blocks (kernels/packed_layout.h: 2 blocks, mxfp4's 4) is
// partial.
std::vector<int64_t> widths(DType t, std::initializer_list<int64_t> common) {
  std::vector<int64_t> n(common);
  if (dtype_info(t).block_size == 32) n.insert(n.end(), {96, 160, 2880});
  return n;
}

struct Case {
  std::vector<uint8_t> w;  // n_rows plain rows
  std::vector<uint8_t> xq; // n_tok activation rows, xs bytes apart
  size_t xs = 0;
};

Case make_case(DType t, int64_t n, int64_t n_rows, int64_t n_tok, std::mt19937& rng,
               testing::Scales s = testing::Scales::kTypical, bool all_max = false) {
  Case c;
  c.w = testing::random_weights(t, n * n_rows, rng, s, all_max);
  c.xs = activation_bytes(t, Precision::kNative, n) + 32;
  c.xq.resize(c.xs * n_tok);
  for (int64_t k = 0; k < n_tok; ++k) {
    auto x = testing::random_activations(n, rng);
    if (all_max)
      for (float& v : x) v = 127.0f;  // every activation quant at +127
    quantize_activation(t, Precision::kNative, x.data(), c.xq.data() + k * c.xs, n);
  }
  return c;
}

TensorView view_of(DType t, const uint8_t* data, int64_t n, int64_t n_rows, bool packed) {
  TensorView v;
  v.data = data;
  v.type = t;
  v.ne[0] = n;
  v.ne[1] = n_rows;
  v.packed = packed;
  return v;
}

TEST(Packed, LayoutRoundTrips) {
  std::mt19937 rng(5);
  for (DType t : kPackedTypes) {
    const TypeTraits& tt = type_traits(t);
    for (int64_t n : widths(t, {256, 768, 2048})) {
      for (int rows : {16, 5}) {  // a whole group and a partial one
        const auto w = testing::random_weights(t, n * rows, rng);
        const size_t rb = row_bytes(t, n);
        std::vector<uint8_t> group(16 * rb, 0xAB), back(rb);
        tt.pack_group(w.data(), rb, rows, group.data(), n);
        for (int i = 0; i < 16; ++i) {
          tt.unpack_row(group.data(), i, back.data(), n);
          if (i < rows) {
            ASSERT_EQ(0, std::memcmp(back.data(), w.data() + i * rb, rb)) << dtype_name(t) << " row " << i;
          } else {  // padding rows read as zeros: scale 0, so they add nothing
            std::vector<float> f(n);
            dequantize_row(t, back.data(), f.data(), n);
            for (float v : f) ASSERT_EQ(v, 0.0f);
          }
        }
      }
    }
  }
}

// Every ISA's packing writes the reference layout byte for byte: whole and
// partial groups, odd block counts, rows further apart than their length.
TEST(Packed, IsaPackingEqualsTheReferenceLayout) {
  std::mt19937 rng(13);
  for (Isa isa : {Isa::kAvx2, Isa::kAvx512, Isa::kNeon, Isa::kNeonDot, Isa::kNeonI8mm}) {
    if (!isa_supported(isa)) continue;
    for (DType t : kPackedTypes) {
      const PackGroupFn f = kernel_table(isa).pack_group[slot(t)];
      if (!f) continue;
      for (int64_t n : widths(t, {256, 768, 1280, 2048}))
        for (int rows : {16, 11, 1})
          for (size_t pad : {size_t{0}, size_t{18}}) {
            const size_t rb = row_bytes(t, n), stride = rb + pad;
            std::vector<uint8_t> src(stride * 16);
            for (uint8_t& b : src) b = static_cast<uint8_t>(rng());
            std::vector<uint8_t> got(16 * rb, 0xAB), want(16 * rb, 0xCD);
            f(src.data(), stride, rows, got.data(), n);
            type_traits(t).pack_group(src.data(), stride, rows, want.data(), n);
            ASSERT_EQ(got, want) << isa_name(isa) << " " << dtype_name(t) << " n " << n << " rows "
                                 << rows << " stride " << stride;
          }
    }
  }
}

// The scalar packed kernel against the plain scalar dot (ggml's arithmetic,
// another summation order): equal up to float rounding of the block sums.
TEST(Packed, ScalarKernelMatchesReferenceDot) {
  std::mt19937 rng(7);
  for (DType t : kPackedTypes)
    for (int64_t n : widths(t, {256, 512, 2048}))
      for (testing::Scales s : {testing::Scales::kTypical, testing::Scales::kLarge}) {
        const int64_t n_rows = 32, n_tok = 3;
        Case c = make_case(t, n, n_rows, n_tok, rng, s);
        std::vector<uint8_t> packed = c.w;
        pack_rows(t, packed.data(), n_rows, n);
        std::vector<float> y(n_tok * n_rows);
        type_traits(t).packed_ref(packed.data(), n_rows / 16, c.xq.data(), c.xs, n_tok, n, y.data(),
                                  n_rows);
        const DotFn dot = ref_kernel_table().dot[slot(t)];
        for (int64_t k = 0; k < n_tok; ++k)
          for (int64_t r = 0; r < n_rows; ++r) {
            const uint8_t* row = c.w.data() + r * row_bytes(t, n);
            const float want = dot(row, c.xq.data() + k * c.xs, n);
            // Bound: a few ulps of the sum of |block terms|, via |w| . |x|.
            std::vector<float> wf(n), xf(n);
            dequantize_row(t, row, wf.data(), n);
            dequantize_row(activation_type(t, Precision::kNative), c.xq.data() + k * c.xs, xf.data(), n);
            double mag = 0;
            for (int64_t i = 0; i < n; ++i) mag += std::fabs(static_cast<double>(wf[i]) * xf[i]);
            EXPECT_NEAR(y[k * n_rows + r], want, 1e-5 * mag + 1e-30)
                << dtype_name(t) << " n " << n << " tok " << k << " row " << r;
          }
      }
}

// Every ISA's packed kernel gives the scalar packed kernel's bits, on random
// and on extreme blocks (every quant and activation at its maximum).
TEST(Packed, IsaKernelsEqualScalarBitForBit) {
  std::mt19937 rng(11);
  for (Isa isa : {Isa::kAvx2, Isa::kAvx512, Isa::kNeon, Isa::kNeonDot, Isa::kNeonI8mm}) {
    if (!isa_supported(isa)) continue;
    for (DType t : kPackedTypes) {
      const PackedTileFn f = kernel_table(isa).packed[slot(t)];
      if (!f) continue;
      for (int64_t n : widths(t, {256, 1280, 2048}))
        for (int64_t n_tok : {1, 3, 4, 5, 8, 9, 17, 70})
          for (bool all_max : {false, true}) {
            const int64_t n_rows = 48;
            Case c = make_case(t, n, n_rows, n_tok, rng, testing::Scales::kTypical, all_max);
            pack_rows(t, c.w.data(), n_rows, n);
            const size_t ys = n_rows + 3;
            std::vector<float> got(ys * n_tok, -1.0f), want(ys * n_tok, -1.0f);
            f(c.w.data(), n_rows / 16, c.xq.data(), c.xs, n_tok, n, got.data(), ys);
            type_traits(t).packed_ref(c.w.data(), n_rows / 16, c.xq.data(), c.xs, n_tok, n,
                                      want.data(), ys);
            for (size_t i = 0; i < got.size(); ++i)
              ASSERT_EQ(f32_bits(got[i]), f32_bits(want[i]))
                  << isa_name(isa) << " " << dtype_name(t) << " n " << n << " tokens " << n_tok
                  << " at " << i;
          }
    }
  }
}

// Through ops.h: where the ISA has a packed kernel, a packed view and a plain
// one of the same rows give the same bits (the plain one is packed a group at
// a time on the way); on every ISA matmul equals matvec per token on a packed
// view, and a packed embedding row dequantizes as the plain one.
TEST(Packed, PackedAndPlainViewsGiveTheSameBits) {
  std::mt19937 rng(13);
  const Isa saved = active_isa();
  for (Isa isa : kAllIsas) {
    if (!isa_supported(isa)) continue;
    set_kernel_isa(isa);
    for (DType t : kPackedTypes) {
      const int64_t n = 512, n_rows = 64;
      for (int64_t n_tok : {1, 6, 19}) {
        Case c = make_case(t, n, n_rows, n_tok, rng);
        std::vector<uint8_t> packed = c.w;
        pack_rows(t, packed.data(), n_rows, n);
        const TensorView plain = view_of(t, c.w.data(), n, n_rows, false);
        const TensorView pk = view_of(t, packed.data(), n, n_rows, true);
        const int64_t r0 = 16, r1 = 48;
        std::vector<float> a(n_tok * (r1 - r0)), b(n_tok * (r1 - r0)), v(r1 - r0), scratch(n);
        matmul_rows(plain, Precision::kNative, c.xq.data(), c.xs, n_tok, a.data(), r1 - r0, r0, r1,
                    scratch.data());
        matmul_rows(pk, Precision::kNative, c.xq.data(), c.xs, n_tok, b.data(), r1 - r0, r0, r1,
                    scratch.data());
        const bool has_packed = kernel_table(isa).packed[slot(t)] != nullptr;
        for (int64_t k = 0; k < n_tok; ++k) {
          matvec_rows(pk, Precision::kNative, c.xq.data() + k * c.xs, v.data(), r0, r1, scratch.data());
          for (int64_t r = 0; r < r1 - r0; ++r) {
            if (has_packed) {
              ASSERT_EQ(f32_bits(a[k * (r1 - r0) + r]), f32_bits(b[k * (r1 - r0) + r]))
                  << isa_name(isa) << " " << dtype_name(t) << " tok " << k << " row " << r;
            }
            ASSERT_EQ(f32_bits(v[r]), f32_bits(b[k * (r1 - r0) + r]));
          }
        }
        std::vector<float> e1(n), e2(n);
        for (int64_t r : {0, 17, 63}) {
          dequantize_matrix_row(plain, r, e1.data());
          dequantize_matrix_row(pk, r, e2.data());
          for (int64_t i = 0; i < n; ++i) ASSERT_EQ(e1[i], e2[i]);
        }
        // The reference precision reads packed rows back too.
        std::vector<float> ref_plain(r1 - r0), ref_pk(r1 - r0);
        std::vector<float> x = testing::random_activations(n, rng);
        matvec_rows(plain, Precision::kReference, x.data(), ref_plain.data(), r0, r1, scratch.data());
        matvec_rows(pk, Precision::kReference, x.data(), ref_pk.data(), r0, r1, scratch.data());
        for (int64_t r = 0; r < r1 - r0; ++r) ASSERT_EQ(ref_plain[r], ref_pk[r]);
      }
    }
  }
  set_kernel_isa(saved);
}

// The same value, or both NaN (inf - inf, inf x 0 past float's range).
bool same_value(float a, float b) {
  return f32_bits(a) == f32_bits(b) || (std::isnan(a) && std::isnan(b));
}

// MXFP4 at its extremes: the blocks of two groups take every E8M0 exponent
// 0..254 (0 and 1 the subnormal scales 2^-128 and 2^-127; 255 is no finite
// scale) and each block every E2M1 code twice, against activations with fp16
// scales from the smallest subnormal to 1 and block sums random or all +127.
// Every ISA's packed kernel gives the scalar packed kernel's value for decode
// and for batches across the 8-token tiles and 64-token blocks; the scalar
// packed kernel is the plain reference dot within float rounding wherever
// nothing leaves float's range (terms whose scale products are subnormal
// round at 2^-149 each).
TEST(Packed, Mxfp4EveryExponentAndCode) {
  std::mt19937 rng(17);
  constexpr int64_t kNb = 17, n = kNb * kQK, n_rows = 32, max_tok = 70;
  std::vector<block_mxfp4> w(static_cast<size_t>(n_rows * kNb));
  for (int64_t i = 0; i < n_rows * kNb; ++i) {
    block_mxfp4& b = w[static_cast<size_t>(i)];
    b.e = static_cast<uint8_t>(i % 255);
    int codes[kQK];
    for (int j = 0; j < kQK; ++j) codes[j] = j % 16;
    std::shuffle(codes, codes + kQK, rng);
    for (int j = 0; j < kQK / 2; ++j)
      b.qs[j] = static_cast<uint8_t>(codes[j] | codes[j + kQK / 2] << 4);
  }
  constexpr uint16_t kActScales[] = {0x0001, 0x0400, 0x1C00, 0x2C00, 0x3C00};
  std::uniform_int_distribution<int> q(-127, 127);
  std::vector<block_q8_0> x(static_cast<size_t>(max_tok * kNb));
  for (int64_t t = 0; t < max_tok; ++t)
    for (int64_t b = 0; b < kNb; ++b) {
      block_q8_0& blk = x[static_cast<size_t>(t * kNb + b)];
      blk.d = kActScales[(t + b) % std::size(kActScales)];
      for (int8_t& v : blk.qs) v = static_cast<int8_t>(t % 7 == 3 ? 127 : q(rng));
    }
  const auto* plain = reinterpret_cast<const uint8_t*>(w.data());
  const size_t rb = row_bytes(DType::MXFP4, n), xs = kNb * sizeof(block_q8_0);
  std::vector<uint8_t> packed(plain, plain + n_rows * rb);
  pack_rows(DType::MXFP4, packed.data(), n_rows, n);
  const auto* xq = reinterpret_cast<const uint8_t*>(x.data());
  std::vector<float> want(static_cast<size_t>(max_tok * n_rows));
  type_traits(DType::MXFP4)
      .packed_ref(packed.data(), n_rows / 16, xq, xs, max_tok, n, want.data(), n_rows);

  int compared = 0;
  const DotFn dot = ref_kernel_table().dot[slot(DType::MXFP4)];
  for (int64_t t = 0; t < max_tok; ++t)
    for (int64_t r = 0; r < n_rows; ++r) {
      const block_mxfp4* row = w.data() + r * kNb;
      const block_q8_0* xt = x.data() + t * kNb;
      double mag = 0;
      for (int64_t b = 0; b < kNb; ++b) {
        const double d = std::ldexp(1.0, row[b].e - 128) * half_to_float(xt[b].d);
        for (int j = 0; j < kQK; ++j) {
          const int code = j < 16 ? row[b].qs[j] & 15 : row[b].qs[j - 16] >> 4;
          mag += std::fabs(d * kMxfp4Values[code] * xt[b].qs[j]);
        }
      }
      if (!(mag < 0x1p124)) continue;
      const float y = want[static_cast<size_t>(t * n_rows + r)];
      ASSERT_TRUE(std::isfinite(y)) << "tok " << t << " row " << r;
      ASSERT_NEAR(y, dot(row, xt, n), 2e-6 * kNb * mag + 64.0 * kNb * 0x1p-149)
          << "tok " << t << " row " << r;
      ++compared;
    }
  EXPECT_GT(compared, max_tok * n_rows / 2);

  for (Isa isa : {Isa::kAvx2, Isa::kAvx512, Isa::kNeon, Isa::kNeonDot, Isa::kNeonI8mm}) {
    if (!isa_supported(isa)) continue;
    const PackedTileFn f = kernel_table(isa).packed[slot(DType::MXFP4)];
    if (!f) continue;
    for (int64_t n_tok : {1, 2, 7, 8, 9, 16, 17, 63, 64, 65, 70}) {
      std::vector<float> got(static_cast<size_t>(n_tok * n_rows), -1.0f);
      f(packed.data(), n_rows / 16, xq, xs, n_tok, n, got.data(), n_rows);
      for (size_t i = 0; i < got.size(); ++i)
        ASSERT_TRUE(same_value(got[i], want[i])) << isa_name(isa) << " tokens " << n_tok << " at "
                                                 << i << ": " << got[i] << ", scalar " << want[i];
    }
  }
}

// Within one input epoch a packed kernel may keep what it derived from an
// input for its next call on the same bytes (kernels/kernel_table.h). Every
// call still gives the scalar packed kernel's bits: a second matrix on the
// same input, the same pointer with fewer tokens or another stride, a later
// row of it, and the same buffer holding new bytes in the next epoch or
// outside any.
TEST(Packed, InputEpochKeepsNothingPastItsInput) {
  std::mt19937 rng(23);
  for (Isa isa : {Isa::kAvx2, Isa::kAvx512, Isa::kNeon, Isa::kNeonDot, Isa::kNeonI8mm}) {
    if (!isa_supported(isa)) continue;
    for (DType t : kPackedTypes) {
      const PackedTileFn f = kernel_table(isa).packed[slot(t)];
      if (!f) continue;
      const int64_t n = 512, n_rows = 32, n_tok = 9;
      Case a = make_case(t, n, n_rows, n_tok, rng), b = make_case(t, n, n_rows, n_tok, rng);
      std::vector<uint8_t> w2 = testing::random_weights(t, n * n_rows, rng);
      pack_rows(t, a.w.data(), n_rows, n);
      pack_rows(t, w2.data(), n_rows, n);
      std::vector<uint8_t> x = a.xq;  // the one input buffer every call reads
      auto check = [&](const std::vector<uint8_t>& w, const uint8_t* xp, size_t xs, int64_t nt,
                       const char* what) {
        const size_t ys = n_rows;
        std::vector<float> got(ys * nt, -1.0f), want(ys * nt, -1.0f);
        f(w.data(), n_rows / 16, xp, xs, nt, n, got.data(), ys);
        type_traits(t).packed_ref(w.data(), n_rows / 16, xp, xs, nt, n, want.data(), ys);
        for (size_t i = 0; i < got.size(); ++i)
          ASSERT_EQ(f32_bits(got[i]), f32_bits(want[i]))
              << isa_name(isa) << " " << dtype_name(t) << " " << what << " at " << i;
      };
      {
        const InputEpochScope scope(next_input_epoch());
        check(a.w, x.data(), a.xs, n_tok, "first call");
        check(w2, x.data(), a.xs, n_tok, "second matrix, same input");
        check(a.w, x.data(), a.xs, n_tok - 4, "fewer tokens");
        check(a.w, x.data() + a.xs, a.xs, n_tok - 1, "a later row");
        check(a.w, x.data(), 2 * a.xs, (n_tok + 1) / 2, "every other row");
        check(w2, x.data(), a.xs, n_tok, "the first input again");
      }
      const uint8_t* buffer = x.data();
      x = b.xq;  // new bytes in the same buffer
      ASSERT_EQ(x.data(), buffer);
      {
        const InputEpochScope scope(next_input_epoch());
        check(a.w, x.data(), a.xs, n_tok, "next epoch, new bytes");
      }
      check(a.w, x.data(), a.xs, n_tok, "no epoch");
      x = a.xq;
      check(w2, x.data(), a.xs, n_tok, "no epoch, new bytes");
    }
  }
}

}  // namespace
}  // namespace colibri

namespace colibri {
namespace {

// Packing down from a source up to 63 bytes above the destination (a part
// read at its offset within the page, packed onto a 64-byte boundary) gives
// the groups packing in place gives.
TEST(Packed, PackingDownOntoAnOverlappingDestination) {
  std::mt19937 rng(21);
  for (DType t : kPackedTypes)
    for (size_t skew : {size_t{0}, size_t{1}, size_t{32}, size_t{63}}) {
      const int64_t n = 512, n_rows = 48;
      const std::vector<uint8_t> plain = testing::random_weights(t, n * n_rows, rng);
      std::vector<uint8_t> want = plain;
      pack_rows(t, want.data(), n_rows, n);
      std::vector<uint8_t> buf(plain.size() + skew);
      std::copy(plain.begin(), plain.end(), buf.begin() + static_cast<std::ptrdiff_t>(skew));
      pack_rows(t, buf.data() + skew, buf.data(), n_rows, n);
      EXPECT_TRUE(std::equal(want.begin(), want.end(), buf.begin())) << dtype_name(t) << " skew " << skew;
    }
}

}  // namespace
}  // namespace colibri
