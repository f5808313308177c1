// FEAT_BF16 (ARMv8.6; Neoverse V1/N2, Cortex-A510/A710 and up, Apple M2):
// bfmlalb and bfmlalt multiply the even and the odd bf16 elements into fp32
// lanes as a fused multiply-add under the ordinary fp32 rounding (unlike
// bfdot and bfmmla, which round their own way), where the plain BF16 dot
// shifts and masks both operands to fp32 first: the same bits
// (neon_widening.h) in fewer instructions. Overlaid on every NEON level where
// the kernel reports BF16 (dispatch.cpp); compiled with +bf16 and called
// nowhere else.
#include "tensor/half.h"
#include "tensor/kernels/arm/neon_widening.h"
#include "tensor/kernels/kernel_table.h"

namespace colibri {
namespace {

struct Bf16Bfmlal {
  static void mac8(float32x4_t& even, float32x4_t& odd, uint16x8_t w, uint16x8_t x) {
    const bfloat16x8_t a = vreinterpretq_bf16_u16(w), b = vreinterpretq_bf16_u16(x);
    even = vbfmlalbq_f32(even, a, b);
    odd = vbfmlaltq_f32(odd, a, b);
  }
  static float to_float(uint16_t h) { return bf16_to_float(h); }
};

}  // namespace

void add_neon_bf16_kernels(KernelTable& t) {
  t.dot[slot(DType::BF16)] = dot_widening<Bf16Bfmlal>;
}

}  // namespace colibri
