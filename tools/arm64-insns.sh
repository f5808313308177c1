#!/usr/bin/env bash
# Instructions per 1k multiply-accumulates of every weight type's product on
# each AArch64 kernel level, counted under qemu-user: qemu logs every
# translated block's instructions (-d in_asm) and every block it executes
# (-d exec, nochain so none is skipped); their product summed is the
# dynamic instruction count. Debian's qemu has no TCG plugins (libinsn.so),
# hence the logs. kernel_insns runs the product 1 and 3 times; the
# difference is two products alone.
# The emulated CPU is -cpu max unless CPU says otherwise: max has FEAT_FHM
# and FEAT_BF16, so there every level's F16 and BF16 dots are the fmlal and
# bfmlal ones; CPU=cortex-a53 counts the plain ones (levels the CPU lacks
# print "-").
#   [CPU=cortex-a53] [TYPES="q4_0 q8_0"] tools/arm64-insns.sh [N_TOK]
#                                   (N_TOK 1: matvec, as decode; 16: a prompt's tiles)
set -euo pipefail
cd "$(dirname "$0")/.."
n_tok=${1:-1}
rows=16
bash tools/build-arm64.sh kernel_insns >/dev/null
qemu=$(command -v qemu-aarch64-static)
cpu=${CPU:-max}
bin=build-arm64/tests/tensor/kernel_insns
log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT

count() {  # count TYPE ISA REPS -> dynamic instructions
  "$qemu" -cpu "$cpu" -d in_asm,exec,nochain -D "$log/q.log" $bin \
    "$1" "$2" $rows "$n_tok" "$3" >/dev/null
  python3 - "$log/q.log" <<'PY'
import re, sys
size, execs, pc, n = {}, {}, None, 0
for line in open(sys.argv[1], errors="replace"):
    if line.startswith("IN:"):
        if pc is not None: size[pc] = n
        pc, n = None, 0
    elif line.startswith("Trace "):
        if pc is not None: size[pc] = n; pc = None
        m = re.search(r"/([0-9a-f]+)/[0-9a-f]+/[0-9a-f]+\]", line)
        if m: execs[int(m.group(1), 16)] = execs.get(int(m.group(1), 16), 0) + 1
    else:
        m = re.match(r"0x([0-9a-f]+):\s", line)
        if m:
            if pc is None and n == 0: pc = int(m.group(1), 16)
            n += 1
if pc is not None: size[pc] = n
print(sum(c * size.get(p, 0) for p, c in execs.items()))
PY
}

macs=$((2 * rows * 4096 * n_tok))
printf '| type | %s |\n|---|---|---|---|---|\n' "scalar | neon | neon-dotprod | neon-i8mm"
for t in ${TYPES:-f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 q2_K q3_K q4_K q5_K q6_K mxfp4}; do
  line="| $t |"
  for isa in scalar neon neon-dotprod neon-i8mm; do
    if ! "$qemu" -cpu "$cpu" $bin $t $isa 1 1 0 >/dev/null 2>&1; then
      line+=" - |"
      continue
    fi
    a=$(count $t $isa 1)
    b=$(count $t $isa 3)
    line+=" $(python3 -c "print(f'{($b - $a) * 1000 / $macs:.0f}')") |"
  done
  echo "$line"
done
