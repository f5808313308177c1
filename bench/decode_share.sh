#!/bin/bash
# Decode as a share of what this machine reads, in the same minutes: ROUNDS
# times, likwid-bench's load_avx512 (Debian package likwid), then one
# `colibri bench` decode repeat; a last likwid-bench run closes the series.
# Each decode repeat's weight bytes a second (bench's "achieved") is divided by
# the mean of the likwid-bench runs just before and just after it; the median
# of those shares and of the decode speeds closes the output.
#
#   bench/decode_share.sh MODEL [ROUNDS] [THREADS] [COLIBRI] [-- extra bench flags]
#   bench/decode_share.sh olmoe-q4_0.gguf 5 2 build/colibri
#
# The decode repeat is `colibri bench -m MODEL -p 64 -n 64 -r 1 -t THREADS
# --no-probe-around` (a warm-up, then one repeat).
set -euo pipefail
MODEL=$1
ROUNDS=${2:-5}
THREADS=${3:-2}
COLIBRI=${4:-build/colibri}
shift $(($# < 4 ? $# : 4))
[[ ${1:-} == -- ]] && shift
source "$(dirname "$0")/likwid.sh"
command -v likwid-bench > /dev/null || { echo "likwid-bench not found (apt-get install likwid)" >&2; exit 1; }

before=$(likwid_gbs "$THREADS")
shares=() speeds=()
for r in $(seq 1 "$ROUNDS"); do
  out=$("$COLIBRI" bench -m "$MODEL" -p 64 -n 64 -r 1 -t "$THREADS" --no-probe-around "$@" 2>&1)
  tg=$(echo "$out" | awk -F'|' '$2 ~ /tg64/ {gsub(/ /, "", $3); print $3}')
  gb=$(echo "$out" | sed -nE 's/^achieved: ([0-9.]+) GB\/s.*/\1/p')
  [[ -n $tg && -n $gb ]] || { echo "round $r: no decode figures from colibri bench:" >&2; echo "$out" >&2; exit 1; }
  after=$(likwid_gbs "$THREADS")
  share=$(awk -v g="$gb" -v a="$before" -v b="$after" 'BEGIN {printf "%.1f", 200 * g / (a + b)}')
  echo "round $r: likwid-bench $before / $after GB/s, decode $tg tok/s, $gb GB/s of weights: $share% of likwid"
  shares+=("$share") speeds+=("$tg")
  before=$after
done
echo "medians of $ROUNDS: decode $(median "${speeds[@]}") tok/s, $(median "${shares[@]}")% of likwid-bench"
