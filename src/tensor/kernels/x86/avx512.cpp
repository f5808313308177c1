// AVX-512 (F, BW, VL, DQ, VNNI, BF16) kernels: x86_common.h with VNNI int8
// products, plus 512-bit float dots.
#define CLB_X86_VNNI 1
#include "tensor/kernels/x86/x86_common.h"

namespace colibri {

void add_avx512_kernels(KernelTable& t) { add_common_x86_kernels(t); }

}  // namespace colibri
