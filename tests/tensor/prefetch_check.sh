#!/bin/sh
# Every x86 kernel that streams weights or cache rows keeps its software
# prefetches after compilation. GCC 12 took a helper holding only prefetches
# for a function without side effects and dropped its calls, silently: the
# attention kernels and, for a while, every packed tile lost theirs, and
# decode after a long prompt ran 13-17% slower. Reads the compiled objects of
# the tensor library (objdump, from binutils) and fails naming each kernel
# function that holds no prefetch instruction. The one-token tiles of q4_0
# and q8_0 are the exception both ways: they stream faster without software
# prefetch (Packed::kOneTokenPrefetch), so any prefetch in them fails too.
#   prefetch_check.sh LIBRARY
set -eu
lib=$1
"${OBJDUMP:-objdump}" -d --no-show-raw-insn -C "$lib" | awk '
  /^[0-9a-f]+ <.*>:$/ {
    name = $0
    fam = ""
    if (name ~ /Packed<\(colibri::DType\)(2|8)>::tile<1>/) fam = "one-token q4_0 or q8_0 tile"
    else if (name ~ /Packed<\(colibri::DType\)[0-9]+>::tile</) fam = "packed tile"
    else if (name ~ /Packed<\(colibri::DType\)[0-9]+>::pair_tile</) fam = "packed pair tile"
    else if (name ~ /PackedQ4K::tile</) fam = "packed q4_K tile"
    else if (name ~ /PackedQ6K::tile</) fam = "packed q6_K tile"
    else if (name ~ /PackedIq4Xs::tile</) fam = "packed iq4_xs tile"
    else if (name ~ /<void colibri::\(anonymous namespace\)::attend_512</) fam = "attend_512"
    else if (name ~ /<void colibri::\(anonymous namespace\)::attend_x86</) fam = "attend_x86"
    else if (name ~ /<void colibri::\(anonymous namespace\)::attend_lanes_512</) fam = "attend_lanes_512"
    else if (name ~ /Q6_KKernel::tile</) fam = "q6_K tile"
    else if (name ~ /Iq4XsKernel::tile</) fam = "iq4_xs tile"
    close_fn()
    if (fam != "") { seen[fam]++; cur = fam; fn = name; here = 0 } else cur = ""
    next
  }
  cur != "" && /prefetch/ { with[cur]++; here++ }
  function close_fn() {
    if (cur == "one-token q4_0 or q8_0 tile") {
      if (here > 0) { printf "%d prefetch instructions (it streams faster without) in %s\n", here, fn; bad = 1 }
    } else if (cur != "" && here == 0) { printf "no prefetch instruction in %s\n", fn; bad = 1 }
  }
  END {
    close_fn()
    n = 0
    for (f in seen) {
      n++
      printf "%s: %d functions, %d prefetch instructions\n", f, seen[f], with[f] + 0
    }
    if (n < 11) { printf "found %d of the 11 kernel families: names changed?\n", n; bad = 1 }
    exit bad
  }'
