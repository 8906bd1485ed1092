#!/usr/bin/env bash
# Launch N simulated SGLang/vLLM workers on consecutive ports (no GPU needed) and print the
# radixgate command that puts the router in front of them. Ctrl-C stops every worker.
#
#   scripts/sim-fleet.sh                    4 workers on 31001..31004
#   scripts/sim-fleet.sh 8 32001            8 workers on 32001..32008
#   scripts/sim-fleet.sh 4 31001 --flavor vllm --time-scale 0.5 --kv-capacity-tokens 100000
#
# Any arguments after N and BASE_PORT go to the simulator (npm run sim -- --help lists them).
set -euo pipefail

count="${1:-4}"
base="${2:-31001}"
shift $(( $# < 2 ? $# : 2 ))

if ! [[ "$count" =~ ^[1-9][0-9]*$ ]]; then
  echo "sim-fleet: N must be a positive integer, got '$count'" >&2
  exit 2
fi
if ! [[ "$base" =~ ^[1-9][0-9]*$ ]] || (( base + count - 1 > 65535 )); then
  echo "sim-fleet: BASE_PORT must be a port such that BASE_PORT + N - 1 <= 65535, got '$base'" >&2
  exit 2
fi

cd "$(dirname "$0")/.."

urls=()
for (( i = 0; i < count; i++ )); do
  urls+=("http://127.0.0.1:$(( base + i ))")
done

cat <<MSG
Starting $count simulated workers: ${urls[*]}

Put radixgate in front of them, in another terminal:
  node --import tsx src/cli.ts --port 30000 --worker-urls ${urls[*]}
or, after npm run build:
  node dist/cli.js --port 30000 --worker-urls ${urls[*]}

MSG

# exec node itself (not npm, which would sit between as a parent): Ctrl-C and SIGTERM reach the
# simulator, which closes every worker cleanly.
exec node --import tsx sim/cli.ts --count "$count" --port "$base" --id w "$@"
