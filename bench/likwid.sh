# Helpers sourced by roofline.sh and decode_share.sh.

# likwid-bench's load_avx512 over N:2GB:THREADS (2 GB over THREADS pinned
# threads, 512-bit loads), in GB/s.
likwid_gbs() {
  likwid-bench -t load_avx512 -W "N:2GB:$1" 2> /dev/null | awk '/^MByte\/s/ {print $2 / 1000}'
}

# The median of the arguments (numbers).
median() {
  printf '%s\n' "$@" | sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'
}
