# Sourced by bench/stream.sh and bench/sweep.sh: a cgroup v1 blkio group that
# caps reads of the disk holding FILE at MBPS MB/s (blkio.throttle.read_bps_device,
# set on the whole disk, not a partition). Prints the group's directory; the
# caller moves processes into it (cgroup.procs) and removes it (rmdir).
#
#   group=$(read_cap_group MODEL.gguf 1300 colibri-bench-$$)
read_cap_group() {
  local file=$1 mbps=$2 name=$3 dev sys group
  dev=$(stat -c %d "$file")
  sys=$(readlink -f "/sys/dev/block/$((dev >> 8)):$((dev & 255))")
  [[ -f $sys/partition ]] && sys=$(dirname "$sys")
  group=/sys/fs/cgroup/blkio$(awk -F: '$2=="blkio"{print $3}' /proc/self/cgroup)/$name
  mkdir -p "$group"
  echo "$(cat "$sys/dev") $((mbps * 1000000))" > "$group/blkio.throttle.read_bps_device"
  echo "$group"
}
