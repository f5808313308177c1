#!/usr/bin/env bash
# Builds the whole project with AddressSanitizer and UndefinedBehaviorSanitizer
# (-DCOLIBRI_SANITIZE=ON) and runs the test suite under them. Any sanitizer
# report fails the run.
#
#   tools/sanitize.sh                 # everything
#   tools/sanitize.sh -R test_formats # extra arguments go to ctest
#
# Environment: BUILD_DIR (default build-asan), JOBS (default 2), CC/CXX.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD_DIR:-$root/build-asan}"
jobs="${JOBS:-2}"

# RelWithDebInfo: optimised like the real build (some bugs only show there),
# with line numbers in the reports.
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCOLIBRI_SANITIZE=ON
cmake --build "$build" -j "$jobs"

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
# One test at a time: several tests time their own servers and threads.
ctest --test-dir "$build" --output-on-failure -j 1 "$@"
