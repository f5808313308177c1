#!/usr/bin/env bash
# Cross-compiles colibri for 64-bit ARM Linux on an x86-64 Debian 12 machine:
# build-arm64/colibri, a statically linked aarch64 executable (no HTTP
# server: Debian ships cpp-httplib only as a shared library), and
# build-arm64/libcolibri.a, the C API (include/colibri.h) with every layer it
# needs in one archive (link it with -lpcre2-8 -luring -lpthread).
#   tools/build-arm64.sh [TARGET...]   default: colibri, libcolibri.a and the
#                                      tests tools/test-arm64.sh runs
#   tools/build-arm64.sh --deps        only install what the build needs
#                                      (fails where apt cannot)
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install-deps.sh

# The cross compiler and the arm64 builds of the libraries colibri links,
# through Debian multiarch.
need=(g++-aarch64-linux-gnu libpcre2-dev:arm64 liburing-dev:arm64 libgtest-dev:arm64 qemu-user-static)
missing=()
for p in "${need[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO=sudo
  export DEBIAN_FRONTEND=noninteractive
  dpkg --print-foreign-architectures | grep -qx arm64 || $SUDO dpkg --add-architecture arm64
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

[ "${1:-}" != "--deps" ] || exit 0

targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(colibri colibri_engine test_tensor test_moe test_golden)
cmake -S . -B build-arm64 -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake -DCOLIBRI_STATIC=ON
cmake --build build-arm64 -j"${JOBS:-$(nproc)}" --target "${targets[@]}"

# The C API's archive: the static libraries of every layer colibri_engine
# links, merged (an MRI script, so members with the same name in two layers
# both stay).
if [ -f build-arm64/src/engine/libcolibri_engine.a ]; then
  {
    echo "create build-arm64/libcolibri.a"
    for l in engine model tokenizer moe formats tensor base; do
      echo "addlib build-arm64/src/$l/libcolibri_$l.a"
    done
    echo "save"
    echo "end"
  } | aarch64-linux-gnu-ar -M
  # base/ and tokenizer/ both define utf8_sanitize and utf8_complete_prefix
  # (differently); the executables get tokenizer's, the first on their link
  # line, and never pull base's utf8.cpp.o. In one archive both would be
  # pulled and clash, so base's copy stays out (ar -M puts it first of the two).
  aarch64-linux-gnu-ar dN 1 build-arm64/libcolibri.a utf8.cpp.o
  aarch64-linux-gnu-nm build-arm64/libcolibri.a 2>/dev/null | grep " T .*utf8_decode" >/dev/null ||
    { echo "build-arm64/libcolibri.a: the tokenizer's utf8.cpp.o was dropped instead of base's" >&2; exit 1; }
fi
if [ -f build-arm64/colibri ]; then file build-arm64/colibri; fi
