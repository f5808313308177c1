#!/usr/bin/env bash
# Decode speed against the memory limit: bench/stream.sh at each limit (cold
# start, cgroup v1), one line per limit with the speed, the disk traffic and
# the streaming bound (what the disk allows at that traffic), from the disk's
# own speed as fio reads the model file (random O_DIRECT reads of one expert
# matrix each, depth 32).
#
#   bench/sweep.sh MODEL.gguf "2G 3G 4G 6G 8G" [colibri run flags...]
# Needs fio (apt-get install fio).
#   bench/sweep.sh olmoe-q4_0.gguf "1536M 2G 3G 4G 5G" -n 128 --temp 1 -s 1 -t 2 --no-history
set -euo pipefail
model=$1 limits=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
bin=${COLIBRI:-$here/../build/colibri}
# The disk's speed at the reads the store issues: one per expert matrix (a
# slab's gate, up or down), random, O_DIRECT, 32 in flight.
slab_mib=$("$bin" plan -m "$model" --mem 64G --no-history 2>/dev/null | grep -o 'slots x [0-9.]* MiB' | head -1 | awk '{print $3}')
part_kib=$(awk -v s="${slab_mib:-6}" 'BEGIN { k = int(s * 1024 / 3 / 4 + 0.5) * 4; if (k < 4) k = 4; print k }')
fio_gb_s() {  # engine: GB/s of random one-matrix O_DIRECT reads, 32 in flight, 10 s
  fio --name=sweep --filename="$model" --readonly --direct=1 --rw=randread --bs="${part_kib}k" \
    --iodepth=32 --ioengine="$1" --runtime=10 --time_based --output-format=terse 2>/dev/null |
    awk -F';' '{printf "%.2f", $7 * 1024 / 1e9}'
}
# The faster of two engines, so the bound is what the disk can do, not what one interface gets.
aio=$(fio_gb_s libaio) uring=$(fio_gb_s io_uring)
disk_gb_s=$(awk -v a="$aio" -v b="$uring" 'BEGIN { print (a > b ? a : b) }')
echo "disk (fio, random ${part_kib} KiB O_DIRECT reads (one expert matrix), depth 32, 10 s): libaio $aio GB/s, io_uring $uring GB/s"
printf '| limit | tok/s | first token | hit %% | MB/token from disk | disk GB/s in run | streaming bound tok/s | share of it | cache slots | peak usage |\n'
printf '|---|---|---|---|---|---|---|---|---|---|\n'
for lim in $limits; do
  out=$(bash "$here/stream.sh" "$model" "$lim" "$@" 2>&1 || true)
  tps=$(grep -o 'generation [0-9]* tok, [0-9.]* tok/s' <<<"$out" | awk '{print $4}' || true)
  first=$(grep -o 'first token [0-9.]* s' <<<"$out" | awk '{print $3}' || true)
  hit=$(grep -o 'hit [0-9.]*%' <<<"$out" | head -1 | tr -dc '0-9.' || true)
  mbt=$(grep -o '[0-9.]* MB/token' <<<"$out" | awk '{print $1}' || true)
  run_gb_s=$(grep -o 'at [0-9.]* GB/s' <<<"$out" | awk '{print $2}' || true)
  slots=$(grep -o 'cache slots [0-9]* of [0-9]*' <<<"$out" | awk '{print $3 "/" $5}' || true)
  usage=$(grep -o 'max_usage [^ ]*' <<<"$out" | awk '{print $2}' || true)
  bound=$(awk -v d="$disk_gb_s" -v m="${mbt:-0}" 'BEGIN { if (m > 0) printf "%.1f", d * 1000 / m; else print "-" }')
  share=$(awk -v t="${tps:-0}" -v b="$bound" 'BEGIN { if (b + 0 > 0) printf "%.0f%%", 100 * t / b; else print "-" }')
  echo "| $lim | ${tps:-?} | ${first:-?} s | ${hit:-100} | ${mbt:-0} | ${run_gb_s:--} | $bound | $share | ${slots:--} | ${usage:-?} |"
done
