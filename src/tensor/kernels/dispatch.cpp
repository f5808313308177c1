// Run-time kernel selection: the scalar table overlaid with every ISA level the
// CPU supports (AVX-512 builds on AVX2's entries, so a type without an AVX-512
// kernel still gets its AVX2 one).
#include "tensor/kernels/dispatch.h"

#include <atomic>

#if defined(__aarch64__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#elif defined(__arm__)
#error "colibri needs AArch64 (64-bit ARM); 32-bit ARM is not supported"
#endif

#include "base/error.h"
#include "tensor/ops.h"

namespace colibri {

namespace {

#if defined(__x86_64__) || defined(__i386__)
constexpr bool kX86 = true;
#else
constexpr bool kX86 = false;
#endif
#if defined(__aarch64__)
constexpr bool kArm = true;
#else
constexpr bool kArm = false;
#endif

KernelTable build_table(Isa isa) {
  KernelTable t = ref_kernel_table();
#if defined(__x86_64__) || defined(__i386__)
  if (isa == Isa::kAvx2 || isa == Isa::kAvx512) add_avx2_kernels(t);
  if (isa == Isa::kAvx512) add_avx512_kernels(t);
#endif
#if defined(__aarch64__)
  if (isa == Isa::kNeon || isa == Isa::kNeonDot || isa == Isa::kNeonI8mm) {
    add_neon_kernels(t);
    const ArmFloatExtensions ext = arm_float_extensions();
    if (ext.fhm) add_neon_fhm_kernels(t);
    if (ext.bf16) add_neon_bf16_kernels(t);
  }
  if (isa == Isa::kNeonDot || isa == Isa::kNeonI8mm) add_neon_dotprod_kernels(t);
  if (isa == Isa::kNeonI8mm) add_neon_i8mm_kernels(t);
#endif
  return t;
}

const KernelTable& table_for(Isa isa) {
  static const KernelTable scalar = build_table(Isa::kScalar);
  static const KernelTable avx2 = build_table(Isa::kAvx2);
  static const KernelTable avx512 = build_table(Isa::kAvx512);
  static const KernelTable neon = build_table(Isa::kNeon);
  static const KernelTable neon_dot = build_table(Isa::kNeonDot);
  static const KernelTable neon_i8mm = build_table(Isa::kNeonI8mm);
  switch (isa) {
    case Isa::kAvx2:
      return avx2;
    case Isa::kAvx512:
      return avx512;
    case Isa::kNeon:
      return neon;
    case Isa::kNeonDot:
      return neon_dot;
    case Isa::kNeonI8mm:
      return neon_i8mm;
    case Isa::kScalar:
      break;
  }
  return scalar;
}

struct Active {
  std::atomic<Isa> isa;
  std::atomic<const KernelTable*> table;
  Active() : isa(best_isa()), table(&table_for(best_isa())) {}
};

Active& active() {
  static Active a;
  return a;
}

}  // namespace

uint64_t next_input_epoch() {
  static std::atomic<uint64_t> last{0};
  return last.fetch_add(1, std::memory_order_relaxed) + 1;
}

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::kScalar:
      return "scalar";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kAvx512:
      return "avx512";
    case Isa::kNeon:
      return "neon";
    case Isa::kNeonDot:
      return "neon-dotprod";
    case Isa::kNeonI8mm:
      return "neon-i8mm";
  }
  return "?";
}

bool isa_supported(Isa isa) {
  switch (isa) {
    case Isa::kScalar:
      return true;
    case Isa::kAvx2:
#if defined(__x86_64__) || defined(__i386__)
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
             __builtin_cpu_supports("f16c");
#else
      return false;
#endif
    case Isa::kAvx512:
#if defined(__x86_64__) || defined(__i386__)
      return isa_supported(Isa::kAvx2) && __builtin_cpu_supports("avx512f") &&
             __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
             __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vnni") &&
             __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512vbmi");
#else
      return false;
#endif
    case Isa::kNeon:
      return kArm;
    // The kernel's hwcaps, not the compiler's flags: one binary runs on a
    // Cortex-A53 and uses sdot / smmla only where the CPU has them.
    case Isa::kNeonDot:
#if defined(__aarch64__)
      return (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
#else
      return false;
#endif
    case Isa::kNeonI8mm:
#if defined(__aarch64__)
      return isa_supported(Isa::kNeonDot) && (getauxval(AT_HWCAP2) & HWCAP2_I8MM) != 0;
#else
      return false;
#endif
  }
  return false;
}

ArmFloatExtensions arm_float_extensions() {
  ArmFloatExtensions ext;
#if defined(__aarch64__)
  // FHM's fmlal is an fp16 instruction: the kernel reports FHM only with
  // FP16, and both are asked for all the same.
  const unsigned long hw = getauxval(AT_HWCAP);
  const unsigned long fp16 = HWCAP_FPHP | HWCAP_ASIMDHP;
  ext.fhm = (hw & fp16) == fp16 && (hw & HWCAP_ASIMDFHM) != 0;
  ext.bf16 = (getauxval(AT_HWCAP2) & HWCAP2_BF16) != 0;
#endif
  return ext;
}

Isa best_isa() {
  if (kX86 && isa_supported(Isa::kAvx512)) return Isa::kAvx512;
  if (kX86 && isa_supported(Isa::kAvx2)) return Isa::kAvx2;
  if (kArm && isa_supported(Isa::kNeonI8mm)) return Isa::kNeonI8mm;
  if (kArm && isa_supported(Isa::kNeonDot)) return Isa::kNeonDot;
  if (kArm) return Isa::kNeon;
  return Isa::kScalar;
}

Isa active_isa() {
  return active().isa.load(std::memory_order_relaxed);
}

void set_kernel_isa(Isa isa) {
  CLB_CHECK(isa_supported(isa), "kernel ISA %s: not supported by this CPU", isa_name(isa));
  active().table.store(&table_for(isa), std::memory_order_release);
  active().isa.store(isa, std::memory_order_relaxed);
}

const KernelTable& active_kernel_table() {
  return *active().table.load(std::memory_order_acquire);
}

const KernelTable& kernel_table(Isa isa) {
  CLB_ASSERT(isa_supported(isa));
  return table_for(isa);
}

}  // namespace colibri
