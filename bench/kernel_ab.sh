#!/usr/bin/env bash
# A/B of two versions of the packed x86 kernels (src/tensor/kernels/x86/
# avx512_packed.cpp) in one binary, alternating pass by pass on the same bytes,
# with a loads-only pass beside them (tests/tensor/bench/kernel_ab.cpp).
#
#   bench/kernel_ab.sh A B TYPE ROWS COLS MIB [TOKENS] [THREADS] [PASSES] [huge] [split]
#   bench/kernel_ab.sh HEAD . q8_0 1024 2048 128 8 2     # HEAD against the working tree
#
# A and B: a git revision (its copy of the file) or a path to a copy of it;
# "." is the working tree's. TYPE: q4_0, q8_0, mxfp4, q5_0, q4_K or q6_K. Needs the Release
# build in build/ (its tensor and base libraries and the file's compile flags).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
a=$1 b=$2
shift 2
build=${BUILD:-$here/build}
rel=src/tensor/kernels/x86/avx512_packed.cpp
flags_file=$build/src/tensor/CMakeFiles/colibri_tensor.dir/flags.make
[[ -f $flags_file ]] || { echo "no $flags_file: configure and build $build first" >&2; exit 2; }
isa=$(sed -n "s|^# Custom options: .*avx512_packed.cpp.o_OPTIONS = ||p" "$flags_file" | tr ';' ' ')
cxx=$(sed -n 's/^CXX_FLAGS = //p' "$flags_file")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# One version of the file, its external names made its own, and an entry
# point for the driver.
variant() {
  local src=$1 tag=$2
  if [[ $src == . ]]; then
    cp "$here/$rel" "$tmp/$tag.cpp"
  elif [[ -f $src ]]; then
    cp "$src" "$tmp/$tag.cpp"
  else
    git -C "$here" show "$src:$rel" > "$tmp/$tag.cpp"
  fi
  # q6_K's packed kernel exists from its commit on.
  local q6=""
  grep -q "struct PackedQ6K" "$tmp/$tag.cpp" &&
    q6="case DType::Q6_K: PackedQ6K::run(w, groups, x, xs, nt, n, y, ys); break;"
  # (q6_K_row_groups_avx512: the external name of revisions before 9e5bb88.)
  sed -i -e "s/\badd_avx512_packed_kernels\b/kernel_ab_${tag}_add/g" \
    -e "s/\bq6_K_row_groups_avx512\b/kernel_ab_${tag}_q6_K/g" "$tmp/$tag.cpp"
  cat >> "$tmp/$tag.cpp" <<EOT
namespace colibri {
void kernel_ab_${tag}(DType t, const uint8_t* w, int64_t groups, const uint8_t* x, size_t xs,
                      int64_t nt, int64_t n, float* y, size_t ys) {
  switch (t) {
    case DType::Q4_0: Packed<DType::Q4_0>::run(w, groups, x, xs, nt, n, y, ys); break;
    case DType::Q8_0: Packed<DType::Q8_0>::run(w, groups, x, xs, nt, n, y, ys); break;
    case DType::MXFP4: Packed<DType::MXFP4>::run(w, groups, x, xs, nt, n, y, ys); break;
    case DType::Q4_K: PackedQ4K::run(w, groups, x, xs, nt, n, y, ys); break;
    $q6
    default: Packed<DType::Q5_0>::run(w, groups, x, xs, nt, n, y, ys); break;
  }
}
}  // namespace colibri
EOT
  # shellcheck disable=SC2086
  c++ $cxx $isa -Wno-error -I"$here/src" -I"$here/include" -c "$tmp/$tag.cpp" -o "$tmp/$tag.o"
}
variant "$a" a &
variant "$b" b &
# shellcheck disable=SC2086
c++ $cxx -I"$here/src" -I"$here/include" -c "$here/tests/tensor/bench/kernel_ab.cpp" -o "$tmp/main.o"
wait %1 %2
c++ "$tmp/main.o" "$tmp/a.o" "$tmp/b.o" "$build/src/tensor/libcolibri_tensor.a" \
  "$build/src/base/libcolibri_base.a" -lpthread -o "$tmp/kernel_ab"
"$tmp/kernel_ab" "$@"
