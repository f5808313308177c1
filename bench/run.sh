#!/bin/bash
# Writes the synthetic models of bench/RESULTS.md and benchmarks them.
# Usage: bench/run.sh COLIBRI_BINARY OUT_DIR [bench args...]
# (files are ~31 GB in all: keep OUT_DIR outside the repository).
set -euo pipefail
BIN=${1:?colibri binary}; OUT=${2:?output dir}; shift 2
ARGS=${*:--p 64 -n 64 -r 3 -t 2}
V=$(cd "$(dirname "$0")/../../shared/data/vocab" && pwd)
mkdir -p "$OUT"
gen() {  # shape type vocab
  [ -f "$OUT/$1-$2.gguf" ] || nice -n 10 "$BIN" synth --shape "$1" --type "$2" --vocab "$V/$3" -o "$OUT/$1-$2.gguf" -t 2
}
gen olmoe-1b-7b q4_0 ggml-vocab-mpt.gguf
gen olmoe-1b-7b q4_k_m ggml-vocab-mpt.gguf
gen olmoe-1b-7b q8_0 ggml-vocab-mpt.gguf
gen qwen3-30b-a3b q4_0 ggml-vocab-qwen2.gguf
for m in olmoe-1b-7b-q4_0 olmoe-1b-7b-q4_k_m olmoe-1b-7b-q8_0 qwen3-30b-a3b-q4_0; do
  nice -n 10 "$BIN" bench -m "$OUT/$m.gguf" $ARGS -o "$OUT/$m.bench.json"
done
