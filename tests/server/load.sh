#!/bin/sh
# Load test of `colibri serve`: 64 connections for 60 s with autocannon.
#   tests/server/load.sh [path/to/colibri]
# Environment: CONNECTIONS, DURATION (s), PARALLEL (slots), MAX_TOKENS.
# Needs `npm ci --prefix tests/server/node` and ../shared/golden.
set -e
here=$(cd "$(dirname "$0")" && pwd)
bin=${1:-$here/../../build/colibri}
COLIBRI_BIN=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin") \
COLIBRI_SHARED_DIR=${COLIBRI_SHARED_DIR:-$here/../../../shared} \
  exec node "$here/node/load.mjs"
