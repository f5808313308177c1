#!/bin/bash
# The read-bandwidth roofline two ways, alternating so that both see the same
# minutes: likwid-bench's load_avx512 (Debian package likwid) and colibri's own
# probe (`colibri bench --probe-only`), ROUNDS times each, then the medians.
#
#   bench/roofline.sh [COLIBRI] [ROUNDS] [THREADS]
#   bench/roofline.sh build/colibri 5 2
#
# likwid-bench reads N:2GB:THREADS (2 GB over THREADS pinned threads, 512-bit
# loads, its own repetition count); colibri reads 2 GiB with read_sum on its
# pool's threads, the median of 7 passes, one stream a thread and four.
set -euo pipefail
COLIBRI=${1:-build/colibri}
ROUNDS=${2:-5}
THREADS=${3:-2}
source "$(dirname "$0")/likwid.sh"
command -v likwid-bench > /dev/null || { echo "likwid-bench not found (apt-get install likwid)" >&2; exit 1; }

lk=() one=() four=()
for r in $(seq 1 "$ROUNDS"); do
  l=$(likwid_gbs "$THREADS")
  c=$("$COLIBRI" bench --probe-only -t "$THREADS" | head -1)
  o=$(echo "$c" | sed -E 's/.*: ([0-9.]+) GB\/s in one stream.*/\1/')
  f=$(echo "$c" | sed -E 's/.*, ([0-9.]+) GB\/s in [0-9]+$/\1/')
  echo "round $r: likwid-bench load_avx512 $l GB/s, colibri probe $o GB/s (one stream a thread), $f GB/s (four)"
  lk+=("$l") one+=("$o") four+=("$f")
done
ml=$(median "${lk[@]}") mo=$(median "${one[@]}") mf=$(median "${four[@]}")
echo "medians of $ROUNDS: likwid-bench $ml GB/s, colibri probe $mo GB/s one stream ($(awk -v a="$mo" -v b="$ml" 'BEGIN {printf "%.1f", 100 * a / b}')% of likwid), $mf GB/s four"
