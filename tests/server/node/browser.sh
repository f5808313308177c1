#!/bin/sh
# ctest entry for the browser test of the web page:
# browser.sh COLIBRI_BINARY ARTIFACT_DIR. Skips (exit 0 with a message)
# without node, node_modules (npm ci --prefix tests/server/node) or chromium
# (apt-get install chromium; CHROMIUM names another binary).
dir=$(cd "$(dirname "$0")" && pwd)
if ! command -v node >/dev/null 2>&1; then
  echo "skipped: node is not installed"; exit 0
fi
if [ ! -d "$dir/node_modules/puppeteer-core" ]; then
  echo "skipped: run 'npm ci --prefix tests/server/node' first"; exit 0
fi
chromium=${CHROMIUM:-/usr/bin/chromium}
if [ ! -x "$chromium" ]; then
  echo "skipped: $chromium not found (apt-get install chromium)"; exit 0
fi
export COLIBRI_BIN="$1" COLIBRI_ARTIFACT_DIR="$2" CHROMIUM="$chromium"
exec node --test "$dir/dashboard.browser.mjs"
