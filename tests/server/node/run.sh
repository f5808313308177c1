#!/bin/sh
# ctest entry for the Node tests: run.sh COLIBRI_BINARY SHARED_DIR.
# Skips (exit 0 with a message) when node, node_modules or the golden models
# are missing; set up with `npm ci --prefix tests/server/node`.
dir=$(cd "$(dirname "$0")" && pwd)
if ! command -v node >/dev/null 2>&1; then
  echo "skipped: node is not installed"; exit 0
fi
if [ ! -d "$dir/node_modules/openai" ]; then
  echo "skipped: run 'npm ci --prefix tests/server/node' first"; exit 0
fi
if [ ! -f "$2/golden/qwen3moe-q8_0.gguf" ]; then
  echo "skipped: golden models not found in $2"; exit 0
fi
# One file at a time: each starts its own servers.
export COLIBRI_BIN="$1" COLIBRI_SHARED_DIR="$2"
rc=0
for f in "$dir"/*.test.mjs; do
  node --test "$f" || rc=1
done
exit $rc
