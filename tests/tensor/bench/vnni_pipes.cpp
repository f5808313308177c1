// Which vector operations share the pipes that run vpdpbusd (x86 with
// AVX-512 VNNI; not a test). A loop of 16 independent vpdpbusd chains runs
// at the machine's vpdpbusd rate; the same loop with 4 more operations of one
// kind shows what each of them costs in vpdpbusd slots: about 1 when it
// issues on the same pipes (so a kernel's floor counts it with its
// vpdpbusds), about 0 when it runs beside them. Also the latency of one
// vpdpbusd chain, in the same slots. All in registers: no memory but the
// broadcast operands' one line, which stays in L1.
//   vnni_pipes
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>

namespace {

#if defined(__x86_64__) && defined(__AVX512VNNI__)

alignas(64) int32_t g_words[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};

constexpr long kIters = 4000000;

// The best of 9 timings of fn (kIters iterations), in seconds.
template <typename Fn>
double best_of(Fn fn) {
  double best = 1e30;
  for (int r = 0; r < 9; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    best = std::min(best,
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

// 16 vpdpbusd into zmm0..zmm15 (each its own chain), then `extra`: 4
// operations writing zmm16..zmm19 from zmm28..zmm31 (or into them, for the
// accumulating ones: a chain of one per iteration, far shorter than the loop).
#define CLB_DPBUSD16                               \
  ".irp r,0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15\n" \
  "vpdpbusd %%zmm30, %%zmm31, %%zmm\\r\n"          \
  ".endr\n"
#define CLB_EXTRA4(op) ".irp r,16,17,18,19\n" op "\n.endr\n"
#define CLB_LOOP(body)                                                                       \
  [] {                                                                                       \
    for (long i = 0; i < kIters; ++i)                                                        \
      asm volatile(body ::"r"(g_words)                                                       \
                   : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", \
                     "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "xmm16",  \
                     "xmm17", "xmm18", "xmm19", "memory");                                   \
  }

struct Case {
  const char* name;
  void (*fn)();
};

int run() {
  asm volatile("kxnord %%k1, %%k1, %%k1" ::: "memory");
  const double base = best_of(CLB_LOOP(CLB_DPBUSD16));
  const double slot = base / (16.0 * kIters);  // seconds per vpdpbusd
  std::printf("16 independent vpdpbusd chains: %.2f G vpdpbusd/s (one core)\n", 1e-9 / slot);
  const Case cases[] = {
      {"vpdpbusd, {1to16} memory operand",
       CLB_LOOP(".irp r,0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15\n"
                "vpdpbusd 4*\\r(%0)%{1to16%}, %%zmm31, %%zmm\\r\n.endr\n")},
      {"+4 vpdpwssd", CLB_LOOP(CLB_DPBUSD16 CLB_EXTRA4("vpdpwssd %%zmm30, %%zmm31, %%zmm\\r"))},
      {"+4 vpmulld", CLB_LOOP(CLB_DPBUSD16 CLB_EXTRA4("vpmulld %%zmm30, %%zmm31, %%zmm\\r"))},
      {"+4 vpmaddwd", CLB_LOOP(CLB_DPBUSD16 CLB_EXTRA4("vpmaddwd %%zmm30, %%zmm31, %%zmm\\r"))},
      {"+4 vfmadd231ps",
       CLB_LOOP(CLB_DPBUSD16 CLB_EXTRA4("vfmadd231ps %%zmm30, %%zmm31, %%zmm\\r"))},
      {"+4 vmulps", CLB_LOOP(CLB_DPBUSD16 CLB_EXTRA4("vmulps %%zmm30, %%zmm31, %%zmm\\r"))},
      {"+4 vcvtdq2ps", CLB_LOOP(CLB_DPBUSD16 CLB_EXTRA4("vcvtdq2ps %%zmm30, %%zmm\\r"))},
      {"+4 vcvtph2ps", CLB_LOOP(CLB_DPBUSD16 CLB_EXTRA4("vcvtph2ps %%ymm30, %%zmm\\r"))},
      {"+4 vpslld", CLB_LOOP(CLB_DPBUSD16 CLB_EXTRA4("vpslld $16, %%zmm30, %%zmm\\r"))},
      {"+4 vpandd", CLB_LOOP(CLB_DPBUSD16 CLB_EXTRA4("vpandd %%zmm30, %%zmm31, %%zmm\\r"))},
      {"+4 vmovdqu16 (merge-masked blend)",
       CLB_LOOP(CLB_DPBUSD16 CLB_EXTRA4("vmovdqu16 %%zmm30, %%zmm\\r%{%%k1%}"))},
      {"+4 vpshufb", CLB_LOOP(CLB_DPBUSD16 CLB_EXTRA4("vpshufb %%zmm30, %%zmm31, %%zmm\\r"))},
      {"+4 vpermb", CLB_LOOP(CLB_DPBUSD16 CLB_EXTRA4("vpermb %%zmm30, %%zmm31, %%zmm\\r"))},
      {"+4 vpaddd", CLB_LOOP(CLB_DPBUSD16 CLB_EXTRA4("vpaddd %%zmm30, %%zmm31, %%zmm\\r"))},
  };
  std::printf("%-36s %s\n", "with", "vpdpbusd slots each");
  for (const Case& c : cases) {
    const double t = best_of(c.fn);
    // The memory-operand row replaces the 16; the others add 4.
    const bool replaces = c.name[0] != '+';
    const double per = replaces ? t / base : (t - base) / (4.0 * kIters) / slot;
    std::printf("%-36s %.2f%s\n", c.name, per, replaces ? " (time over the register form)" : "");
  }
  const double chain = best_of(CLB_LOOP(".rept 16\nvpdpbusd %%zmm30, %%zmm31, %%zmm0\n.endr\n"));
  // 16 dependent steps against 16 independent ones: a step's latency in slots.
  std::printf("one chain of vpdpbusd: %.1f slots a step (its latency)\n", chain / base);
  return 0;
}

#else

int run() {
  std::puts("vnni_pipes: needs x86-64 built with AVX-512 VNNI");
  return 0;
}

#endif

}  // namespace

int main() {
  return run();
}
