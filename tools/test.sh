#!/usr/bin/env bash
# The whole test suite: a release build with every test, then the same tests
# under AddressSanitizer and UndefinedBehaviorSanitizer.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install-deps.sh
jobs=$(nproc)

# The server's tests through the official openai client need Node.js 20+;
# where it is missing they skip with a message.
if command -v npm >/dev/null && [ "$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)" -ge 20 ]; then
  npm ci --prefix tests/server/node --no-audit --no-fund --loglevel=error || echo "npm ci failed: server_node will skip"
fi

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j"$jobs"
(cd build && ctest --output-on-failure -j1)

JOBS=$jobs bash tools/sanitize.sh

# The ARM64 build and its tests under qemu-user (skips with a message where
# the cross toolchain or qemu cannot be installed).
JOBS=$jobs bash tools/test-arm64.sh
