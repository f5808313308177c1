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
# RUNS=3 runs each limit three times and reports the median run.
# READ_MBPS=1300 caps the disk's reads (bench/stream.sh), for fio too, so that
# the bound is the capped disk's. IN_MEMORY=1 also measures the file's decode
# speed with every weight in memory (colibri bench, no limit), the other bound:
# the bound column is then the smaller of the two.
set -euo pipefail
model=$1 limits=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
bin=${COLIBRI:-$here/../build/colibri}
# The disk's speed at the reads the store issues: one per expert matrix (a
# slab's gate, up or down), random, O_DIRECT, 32 in flight.
slab_mib=$("$bin" plan -m "$model" --mem 64G --no-history 2>/dev/null | grep -o 'slots x [0-9.]* MiB' | head -1 | awk '{print $3}')
part_kib=$(awk -v s="${slab_mib:-6}" 'BEGIN { k = int(s * 1024 / 3 / 4 + 0.5) * 4; if (k < 4) k = 4; print k }')
# Under READ_MBPS, fio runs in a blkio cgroup with the same cap as the runs.
capped() {
  if [[ -z ${READ_MBPS:-} ]]; then "$@"; return; fi
  source "$here/read_cap.sh"
  local bcg
  bcg=$(read_cap_group "$model" "$READ_MBPS" "colibri-fio-$$")
  bash -c 'echo $$ > "$0"; exec "$@"' "$bcg/cgroup.procs" "$@" || true
  rmdir "$bcg" 2>/dev/null || true
}
fio_gb_s() {  # engine: GB/s of random one-matrix O_DIRECT reads, 32 in flight, 10 s
  capped fio --name=sweep --filename="$model" --readonly --direct=1 --rw=randread --bs="${part_kib}k" \
    --iodepth=32 --ioengine="$1" --runtime=10 --time_based --output-format=terse 2>/dev/null |
    awk -F';' '{printf "%.2f", $7 * 1024 / 1e9}'
}
# The faster of two engines, so the bound is what the disk can do, not what one interface gets.
aio=$(fio_gb_s libaio) uring=$(fio_gb_s io_uring)
disk_gb_s=$(awk -v a="$aio" -v b="$uring" 'BEGIN { print (a > b ? a : b) }')
echo "disk (fio, random ${part_kib} KiB O_DIRECT reads (one expert matrix), depth 32, 10 s${READ_MBPS:+, reads capped at $READ_MBPS MB/s}): libaio $aio GB/s, io_uring $uring GB/s"
mem_tps=""
if [[ -n ${IN_MEMORY:-} ]]; then
  # The median decode of three repeats with every weight in memory (the
  # threads flag of the runs, if given).
  threads=2
  for ((i = 1; i <= $#; ++i)); do [[ ${!i} == -t ]] && { j=$((i + 1)); threads=${!j}; }; done
  mem_tps=$("$bin" bench -m "$model" -p 16 -n 64 -r 3 -t "$threads" --no-probe-around 2>&1 |
            awk '/^\| tg64/ {print $4}')
  echo "in memory (colibri bench -p 16 -n 64 -r 3 -t $threads, median): ${mem_tps:-?} tok/s"
fi
printf '| limit | tok/s | first token | hit %% | MB/token from disk | disk GB/s in run | streaming bound tok/s | share of it | cache slots | peak usage |\n'
printf '|---|---|---|---|---|---|---|---|---|---|\n'
runs=${RUNS:-1}
for lim in $limits; do
  # RUNS runs a limit; the row is the run with the median speed, the others'
  # speeds beside it.
  outs=() speeds=()
  for ((r = 0; r < runs; ++r)); do
    outs[r]=$(bash "$here/stream.sh" "$model" "$lim" "$@" 2>&1 || true)
    speeds[r]=$(grep -o 'generation [0-9]* tok, [0-9.]* tok/s' <<<"${outs[r]}" | awk '{print $4}' || true)
  done
  mid=$(for r in "${!speeds[@]}"; do echo "${speeds[r]:-0} $r"; done | sort -g | awk -v n="$runs" 'NR == int((n + 1) / 2) {print $2}')
  out=${outs[mid]}
  tps=${speeds[mid]}
  [[ $runs -gt 1 ]] && tps="$tps ($(printf '%s\n' "${speeds[@]}" | sort -g | paste -sd/))"
  first=$(grep -o 'first token [0-9.]* s' <<<"$out" | awk '{print $3}' || true)
  hit=$(grep -o 'hit [0-9.]*%' <<<"$out" | head -1 | tr -dc '0-9.' || true)
  mbt=$(grep -o '[0-9.]* MB/token' <<<"$out" | awk '{print $1}' || true)
  run_gb_s=$(grep -o 'at [0-9.]* GB/s' <<<"$out" | awk '{print $2}' || true)
  slots=$(grep -o 'cache slots [0-9]* of [0-9]*' <<<"$out" | awk '{print $3 "/" $5}' || true)
  usage=$(grep -o 'max_usage [^ ]*' <<<"$out" | awk '{print $2}' || true)
  fails=$(grep -o 'failcnt [0-9]*' <<<"$out" | awk '{print $2}' || true)
  bound=$(awk -v d="$disk_gb_s" -v m="${mbt:-0}" -v c="${mem_tps:-0}" \
    'BEGIN { b = m > 0 ? d * 1000 / m : 0; if (c > 0 && (b == 0 || c < b)) b = c; if (b > 0) printf "%.1f", b; else print "-" }')
  share=$(awk -v t="${tps%% *}" -v b="$bound" 'BEGIN { if (b + 0 > 0) printf "%.0f%%", 100 * t / b; else print "-" }')
  echo "| $lim | ${tps:-?} | ${first:-?} s | ${hit:-100} | ${mbt:-0} | ${run_gb_s:--} | $bound | $share | ${slots:--} | ${usage:-?} (failcnt ${fails:-?}) |"
done
