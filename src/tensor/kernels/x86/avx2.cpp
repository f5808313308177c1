// AVX2 + FMA + F16C kernels (x86_common.h with vpmaddubsw int8 products).
#define CLB_X86_VNNI 0
#include "tensor/kernels/x86/x86_common.h"

namespace colibri {

void add_avx2_kernels(KernelTable& t) { add_common_x86_kernels(t); }

}  // namespace colibri
