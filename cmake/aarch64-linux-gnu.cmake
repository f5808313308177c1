# Cross-compiles colibri for 64-bit ARM Linux with Debian's
# g++-aarch64-linux-gnu and the arm64 libraries installed through multiarch
# (tools/build-arm64.sh installs both):
#   cmake -S . -B build-arm64 -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)

# Headers of header-only packages (nlohmann-json, CLI11) are architecture
# independent and live in /usr/include; libraries and their pkg-config files
# come from the arm64 multiarch directory, never the host's.
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(ENV{PKG_CONFIG_LIBDIR} "/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_PATH} "")

# Test binaries run under qemu-user (tools/test-arm64.sh); ctest and
# gtest_discover_tests use this to launch them.
find_program(COLIBRI_QEMU_AARCH64 qemu-aarch64-static)
if(COLIBRI_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${COLIBRI_QEMU_AARCH64};-L;/usr/aarch64-linux-gnu)
endif()
