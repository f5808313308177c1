// FEAT_FHM (ARMv8.2 optional, ARMv8.4 with FP16: Apple M1, Neoverse V1,
// Cortex-A510/A710 and up): fmlal and fmlal2 multiply fp16 pairs into fp32
// lanes with one rounding, where the plain F16 dot widens both operands
// (fcvtl, fcvtl2) and then multiplies (fmla): three instructions for eight
// products where the plain level takes six, for the same bits
// (neon_widening.h). Overlaid on every NEON level where the kernel reports
// FHM (dispatch.cpp); compiled with +fp16fml and called nowhere else.
#include "tensor/half.h"
#include "tensor/kernels/arm/neon_widening.h"
#include "tensor/kernels/kernel_table.h"

namespace colibri {
namespace {

struct F16Fmlal {
  static void mac8(float32x4_t& lo, float32x4_t& hi, uint16x8_t w, uint16x8_t x) {
    const float16x8_t a = vreinterpretq_f16_u16(w), b = vreinterpretq_f16_u16(x);
    lo = vfmlalq_low_f16(lo, a, b);
    hi = vfmlalq_high_f16(hi, a, b);
  }
  static float to_float(uint16_t h) { return half_to_float(h); }
};

}  // namespace

void add_neon_fhm_kernels(KernelTable& t) {
  t.dot[slot(DType::F16)] = dot_widening<F16Fmlal>;
}

}  // namespace colibri
