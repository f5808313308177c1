#!/usr/bin/env bash
# Time to full speed of `colibri serve` from a cold page cache: the server is
# started, and one 128-token completion after another (sampled, temperature 1,
# a new seed and prompt each, so each routes to experts of its own) is timed
# by the client from the moment the server answers /health; REQUESTS of them
# (default 8). Where every expert fits, the store reads them all
# in the background at start (--warm, the default); --no-warm reads each one
# when a token first routes to it.
#
#   bench/warm.sh MODEL.gguf [serve flags...]
#   bench/warm.sh olmoe-1b-7b-q4_0.gguf --no-warm
set -euo pipefail
model=$1
shift
here=$(cd "$(dirname "$0")" && pwd)
bin=${COLIBRI:-$here/../build/colibri}
port=${PORT:-8097}
sync
echo 1 > /proc/sys/vm/drop_caches 2>/dev/null || echo "(could not drop caches: not a cold start)"
start=$(date +%s.%N)
"$bin" serve -m "$model" --port "$port" -q "$@" > /tmp/colibri-warm.log 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
until curl -sf "http://127.0.0.1:$port/health" > /dev/null; do sleep 0.05; done
up=$(date +%s.%N)
echo "server up after $(echo "$up - $start" | bc) s"
prompts=("The history of the" "Once upon a time" "In the beginning" "The river ran" "She opened the door" \
  "Numbers and letters" "A long way from home" "The last train")
for i in $(seq 1 "${REQUESTS:-8}"); do
  t0=$(date +%s.%N)
  n=$(curl -sf "http://127.0.0.1:$port/v1/completions" -H 'Content-Type: application/json' \
    -d "{\"prompt\": \"${prompts[$(( (i - 1) % ${#prompts[@]} ))]}\", \"max_tokens\": 128, \"temperature\": 1, \"seed\": $i, \"ignore_eos\": true}" |
    grep -o '"completion_tokens":[0-9]*' | cut -d: -f2)
  t1=$(date +%s.%N)
  rate=$(echo "$n / ($t1 - $t0)" | bc -l)
  printf 'request %d: %s tokens, %.1f tok/s, done %.1f s after start\n' "$i" "$n" "$rate" "$(echo "$t1 - $start" | bc)"
done
curl -sf "http://127.0.0.1:$port/v1/colibri/stats" | grep -o '"warm[a-z_]*":[0-9.e+-]*' | tr '\n' ' '
echo
