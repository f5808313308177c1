#!/usr/bin/env bash
# Runs one generation under a cgroup v1 memory limit, cold cache, and prints
# colibri's summary plus the cgroup's peak usage and OOM counters.
#
#   bench/stream.sh MODEL.gguf LIMIT [colibri run flags...]
#   bench/stream.sh /work/synth/olmoe-1b-7b-q8_0.gguf 3G -n 128 --temp 1 -s 1 -t 2
#   PROMPT="$(cat long.txt)" bench/stream.sh ...   (prompt speed under the limit)
#   READ_MBPS=1300 bench/stream.sh ...   (the file's disk read at most 1300 MB/s)
#
# READ_MBPS caps the reads of the file's block device (cgroup v1 blkio
# throttle), so that a run reads at a known rate: a host that keeps the file in
# its own cache (drop_caches empties only this machine's) reads it far faster
# than its disk would, and differently from run to run.
# The budget given to colibri (--mem) is LIMIT less the fixed overhead the plan
# states, so the whole process, page cache included, must fit in LIMIT.
set -euo pipefail
model=$1 limit=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
bin=${COLIBRI:-$here/../build/colibri}
to_bytes() { numfmt --from=iec "${1%iB}"; }
limit_b=$(to_bytes "$limit")
overhead_b=$((64 << 20))
mem_b=$((limit_b - overhead_b))

parent=/sys/fs/cgroup/memory$(awk -F: '$2=="memory"{print $3}' /proc/self/cgroup)
cg=$parent/colibri-bench-$$
mkdir "$cg"
trap 'rmdir "$cg" 2>/dev/null || true' EXIT
echo "$limit_b" > "$cg/memory.limit_in_bytes"
sync
echo 1 > /proc/sys/vm/drop_caches 2>/dev/null || echo "(could not drop caches: not a cold start)"
echo "limit $limit ($limit_b bytes), --mem $mem_b bytes"
procs=("$cg/cgroup.procs")
if [[ -n ${READ_MBPS:-} ]]; then
  source "$here/read_cap.sh"
  bcg=$(read_cap_group "$model" "$READ_MBPS" "colibri-bench-$$")
  trap 'rmdir "$cg" "$bcg" 2>/dev/null || true' EXIT
  procs+=("$bcg/cgroup.procs")
  echo "reads of the model's disk capped at $READ_MBPS MB/s"
fi
start=$(date +%s.%N)
set +e
prompt=${PROMPT:-The history of the}
bash -c 'for p in $0; do echo $$ > "$p"; done; exec "$@"' "${procs[*]}" "$bin" run -m "$model" --mem "$mem_b" -p "$prompt" "$@" >/dev/null 2>/tmp/colibri-stream.err
rc=$?
set -e
end=$(date +%s.%N)
grep -v '^$' /tmp/colibri-stream.err | tail -3
echo "exit $rc, wall $(echo "$end - $start" | bc) s"
echo "cgroup: max_usage $(numfmt --to=iec $(cat $cg/memory.max_usage_in_bytes)) of limit $limit, failcnt $(cat $cg/memory.failcnt), $(grep oom_kill $cg/memory.oom_control || echo 'oom_kill ?')"
# Reclaim near the limit shows as major faults (pages of the binary and the
# mapped metadata read again) and as a failcnt above 0.
echo "cgroup: $(awk '$1 == "total_pgmajfault" || $1 == "total_cache" || $1 == "total_rss" || $1 == "total_mapped_file" { printf "%s %s  ", $1, $2 }' $cg/memory.stat)"
