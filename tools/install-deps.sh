#!/usr/bin/env bash
# Installs the Debian 12 packages colibri builds and tests with (root or sudo).
set -euo pipefail
pkgs=(build-essential cmake pkg-config git ca-certificates
      libpcre2-dev nlohmann-json3-dev libcli11-dev libcpp-httplib-dev liburing-dev
      libgtest-dev python3 python3-jinja2
      python3-numpy python3-regex python3-torch libopenblas0-pthread
      chromium)  # headless, for the web page's browser test (server_browser)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO=sudo
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
