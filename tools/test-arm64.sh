#!/usr/bin/env bash
# The ARM64 build under emulation (qemu-user): the kernel tests on three
# CPUs, -cpu max (sdot and smmla: the neon-i8mm level; fmlal and bfmlal for
# the F16 and BF16 dots), -cpu cortex-a76 (the Raspberry Pi 5's: sdot and
# fp16 arithmetic but neither fmlal nor bf16: neon-dotprod) and -cpu
# cortex-a53 (none of them: plain neon), the store's page-size and io_uring
# fallback tests, a golden subset, and greedy text on golden models against
# the x86 build's (build/colibri, where tools/test.sh has built it). Skips
# with a message where the cross toolchain or qemu cannot be installed.
# About 2 minutes of emulation on 2 cores, after the cross build.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! bash tools/build-arm64.sh --deps >/tmp/colibri-arm64-deps.log 2>&1; then
  echo "test-arm64: SKIPPED: the aarch64 cross toolchain or qemu-user-static could not be installed"
  tail -5 /tmp/colibri-arm64-deps.log
  exit 0
fi
bash tools/build-arm64.sh colibri colibri_engine test_tensor test_moe test_golden

qemu=$(command -v qemu-aarch64-static)
bin=build-arm64
shared=${COLIBRI_SHARED_DIR:-$(cd .. && pwd)/shared}
fail=0
step() {  # step NAME CMD...: runs, reports, remembers a failure
  local name=$1 t0=$SECONDS
  shift
  if "$@" >/tmp/colibri-arm64-step.log 2>&1; then
    echo "test-arm64: ok   $name ($((SECONDS - t0)) s)"
  else
    echo "test-arm64: FAIL $name"
    tail -40 /tmp/colibri-arm64-step.log
    fail=1
  fi
}

# The dotprod, i8mm, fhm and bf16 objects define no weak (COMDAT) symbols:
# the linker could otherwise keep their copy of a shared inline function,
# built with sdot, smmla, fmlal or bfmlal allowed, for callers on a CPU
# without them.
no_shared_inlines() {
  local objs=$bin/src/tensor/CMakeFiles/colibri_tensor.dir/kernels/arm
  ! aarch64-linux-gnu-nm --defined-only "$objs/neon_dotprod.cpp.o" "$objs/neon_i8mm.cpp.o" \
    "$objs/neon_fhm.cpp.o" "$objs/neon_bf16.cpp.o" | grep -E ' [WVu] '
}
step "no shared inline code in the dotprod/i8mm/fhm/bf16 objects" no_shared_inlines

# Each CPU must get its own level and float extensions (COLIBRI_EXPECT_ISA,
# COLIBRI_EXPECT_FLOAT_EXT, tests/tensor/arm_dispatch_test.cpp); every level
# the CPU has is checked against the scalar reference, and a level it lacks
# must refuse to be chosen.
for cpu in max:neon-i8mm:fhm+bf16 cortex-a76:neon-dotprod:none cortex-a53:neon:none; do
  IFS=: read -r name isa ext <<<"$cpu"
  step "tensor kernels, -cpu $name" env COLIBRI_EXPECT_ISA="$isa" COLIBRI_EXPECT_FLOAT_EXT="$ext" \
    "$qemu" -cpu "$name" $bin/tests/tensor/test_tensor
done
# qemu-user has no io_uring: the store runs on the pread fallback here.
step "store: page sizes, I/O engines" "$qemu" -cpu max $bin/tests/moe/test_moe \
  --gtest_filter='PageSize.*:*IoEngine*:StreamingStore.*'

if [ -d "$shared/golden" ]; then
  # The types models use most, GPT-OSS's MXFP4 experts and IQ4 among them, in under
  # half a minute of emulation (an F16 file takes 85 s alone; the F16 dot is
  # in the kernel tests).
  g='Models/Golden.MatchesLlamaCpp'
  filter="$g/qwen3moe_q4_0:$g/olmoe_q8_0:$g/mixtral_q4_0:$g/qwen3moe_h256_q4_k_m:$g/qwen3moe_h256_q6_k"
  filter+=":$g/gptoss_mxfp4*:$g/qwen3moe_h256_iq4_xs:$g/deepseek_v3_iq4_nl:$g/qwen3moe_h256_iq1_s*"
  filter+=":$g/qwen3moe_h256_iq3_xxs*:$g/qwen3moe_h256_mixed"
  step "golden subset, -cpu max" "$qemu" -cpu max $bin/tests/golden/test_golden --gtest_filter="$filter"
  step "golden q4_0 and mxfp4, -cpu cortex-a53" "$qemu" -cpu cortex-a53 $bin/tests/golden/test_golden \
    --gtest_filter="$g/qwen3moe_q4_0:$g/mixtral_q4_0:$g/gptoss_mxfp4*:$g/qwen3moe_h256_iq4_xs:$g/qwen3moe_h256_iq1_s"
  # Greedy text: the ARM binary at each level equals the x86 build's.
  # greedy_text MODEL "CPUS" [EXTRA FLAGS...]
  greedy_text() {
    local m=$1 cpus=$2 cpu got want
    shift 2
    local args=(run -m "$shared/golden/$m.gguf" -p "The capital of France is" -n 16 --temp 0 -t 2 "$@")
    want=$(build/colibri "${args[@]}" 2>/dev/null)
    for cpu in $cpus; do
      got=$("$qemu" -cpu $cpu $bin/colibri "${args[@]}" 2>/dev/null || echo "(colibri failed)")
      if [ "$got" == "$want" ]; then
        echo "test-arm64: ok   greedy text $m $* -cpu $cpu"
      else
        echo "test-arm64: FAIL greedy text $m $* -cpu $cpu"
        printf '  x86:   %q\n  arm64: %q\n' "$want" "$got"
        fail=1
      fi
    done
  }
  if [ -x build/colibri ]; then
    for m in qwen3moe-q4_0 olmoe-q8_0 mixtral-q4_0 gptoss-mxfp4; do
      greedy_text $m "max cortex-a76 cortex-a53"
    done
    # And over q8_0 and q4_0 KV caches (the NEON block attention; the q8_0
    # quantizer is the x86 one to the bit, the q4_0 one is scalar everywhere).
    # The ISAs' products differ in their last bits (the order of float sums),
    # which a 4-bit cache turns into a whole step wherever a key or value sits
    # on a rounding edge: on the GPT-OSS file (random weights, near-flat
    # logits) the two texts part after a few tokens, so q4_0 is compared on
    # OLMoE only (the kernels themselves are checked bit for bit above).
    for m in olmoe-q8_0 gptoss-mxfp4; do
      greedy_text $m "max cortex-a53" --kv-type q8_0
    done
    greedy_text olmoe-q8_0 "max cortex-a53" --kv-type q4_0
  else
    echo "test-arm64: greedy text against x86 SKIPPED: build/colibri is not built"
  fi
else
  echo "test-arm64: golden subset SKIPPED: $shared/golden is absent"
fi
exit $fail
