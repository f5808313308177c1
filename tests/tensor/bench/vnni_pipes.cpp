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

// 1.0f in every word: the float operations' operands stay normal numbers
// (whatever a register held before could be a subnormal, whose microcode
// assist would cost many slots), and the integer ones do not care.
alignas(64) uint32_t g_words[16] = {
    0x3F800000, 0x3F800000, 0x3F800000, 0x3F800000, 0x3F800000, 0x3F800000, 0x3F800000, 0x3F800000,
    0x3F800000, 0x3F800000, 0x3F800000, 0x3F800000, 0x3F800000, 0x3F800000, 0x3F800000, 0x3F800000};

constexpr long kIters = 4000000;

// The best of 15 timings of fn and of base (kIters iterations each, the two
// alternating, so that both see the same minutes of a noisy host), in
// seconds.
struct Pair {
  double fn, base;
};
template <typename Fn, typename Base>
Pair best_of(Fn fn, Base base) {
  auto time = [](auto f) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  Pair best{1e30, 1e30};
  for (int r = 0; r < 15; ++r) {
    best.fn = std::min(best.fn, time(fn));
    best.base = std::min(best.base, time(base));
  }
  return best;
}

// 16 vpdpbusd into zmm0..zmm15 (each its own chain), then 4 operations of
// one kind writing zmm16..zmm19 from zmm30 and zmm31 (the accumulating ones
// into them, zeroed each iteration).
#define CLB_DPBUSD16                               \
  ".irp r,0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15\n" \
  "vpdpbusd %%zmm30, %%zmm31, %%zmm\\r\n"          \
  ".endr\n"
#define CLB_EXTRA4(op) ".irp r,16,17,18,19\n" op "\n.endr\n"
// Each iteration's operands, set afresh (loads and zeroing idioms: no
// vector pipe): zmm30 and zmm31 1.0f in every word, zmm16..zmm19 zero, k1
// all ones (the masked blend's mask).
#define CLB_OPERANDS                                         \
  "vbroadcastss (%0), %%zmm30\nvbroadcastss (%0), %%zmm31\n" \
  "kxnord %%k1, %%k1, %%k1\n"                                \
  ".irp r,16,17,18,19\nvpxord %%zmm\\r, %%zmm\\r, %%zmm\\r\n.endr\n"
#define CLB_LOOP(body)                                                                       \
  [] {                                                                                       \
    for (long i = 0; i < kIters; ++i)                                                        \
      asm volatile(CLB_OPERANDS body ::"r"(g_words)                                          \
                   : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", \
                     "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "xmm16",  \
                     "xmm17", "xmm18", "xmm19", "xmm30", "xmm31", "k1", "memory");           \
  }

struct Case {
  const char* name;
  void (*fn)();
};

int run() {
  const auto base_loop = CLB_LOOP(CLB_DPBUSD16);
  const double base = best_of(base_loop, base_loop).fn;
  std::printf("16 independent vpdpbusd chains: %.2f G vpdpbusd/s (one core)\n",
              16.0 * kIters / base * 1e-9);
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
      {"+4 vpternlogd",
       CLB_LOOP(CLB_DPBUSD16 CLB_EXTRA4("vpternlogd $0xCA, %%zmm30, %%zmm31, %%zmm\\r"))},
      {"+4 vpsrlw", CLB_LOOP(CLB_DPBUSD16 CLB_EXTRA4("vpsrlw $4, %%zmm30, %%zmm\\r"))},
      {"+4 vpmovsxbd", CLB_LOOP(CLB_DPBUSD16 CLB_EXTRA4("vpmovsxbd %%xmm30, %%zmm\\r"))},
      {"+4 vpbroadcastd from memory",
       CLB_LOOP(CLB_DPBUSD16 CLB_EXTRA4("vpbroadcastd (%0), %%zmm\\r"))},
  };
  std::printf("%-36s %s\n", "with", "vpdpbusd slots each");
  for (const Case& c : cases) {
    const Pair t = best_of(c.fn, base_loop);
    const double slot = t.base / (16.0 * kIters);  // seconds per vpdpbusd
    // The memory-operand row replaces the 16; the others add 4.
    const bool replaces = c.name[0] != '+';
    const double per = replaces ? t.fn / t.base : (t.fn - t.base) / (4.0 * kIters) / slot;
    std::printf("%-36s %.2f%s\n", c.name, per, replaces ? " (time over the register form)" : "");
  }
  const Pair chain =
      best_of(CLB_LOOP(".rept 16\nvpdpbusd %%zmm30, %%zmm31, %%zmm0\n.endr\n"), base_loop);
  // 16 dependent steps against 16 independent ones: a step's latency in slots.
  std::printf("one chain of vpdpbusd: %.1f slots a step (its latency)\n", chain.fn / chain.base);
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
