// ARMv8.2 dotprod kernels (Cortex-A55/A76 and up, Apple M, Neoverse): the
// integer dots of neon_common.h on sdot, 16 int8 products an instruction
// where the plain level takes four. Compiled with +dotprod and called only
// where the kernel reports it (dispatch.cpp: HWCAP_ASIMDDP).
#define CLB_ARM_DOTPROD 1
#include "tensor/kernels/arm/neon_common.h"

namespace colibri {

void add_neon_dotprod_kernels(KernelTable& t) {
  add_neon_int_dots(t);
}

}  // namespace colibri
