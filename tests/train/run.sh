#!/usr/bin/env bash
# Runs tools/train/test_qwen3moe.py with Debian's Python; exit 77 = skipped.
set -u
dir=$1
py=/usr/bin/python3
if ! [ -x "$py" ] || ! "$py" -c "import torch, numpy, regex" 2>/dev/null; then
  echo "python3-torch, python3-numpy or python3-regex is missing: train_reference skipped"
  exit 77
fi
cd "$dir" && COLIBRI_SHARED_DIR=${2:-} exec "$py" -m unittest -q test_qwen3moe
