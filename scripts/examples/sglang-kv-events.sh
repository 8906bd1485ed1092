#!/usr/bin/env bash
# Example: radixgate routing on SGLang's KV-cache events (docs/kv-events.md), one SGLang server per
# machine (the common layout: one engine per node, same ports everywhere), so the endpoint
# templates find every engine from its host name.
#
# On each GPU node (SGLang's option: --kv-events-config, python/sglang/srt/server_args.py; the
# JSON fields are those of KVEventsConfig in python/sglang/srt/disaggregation/kv_events.py):
#
#   python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct \
#     --host 0.0.0.0 --port 30001 \
#     --kv-events-config '{"publisher": "zmq", "endpoint": "tcp://*:5557", "replay_endpoint": "tcp://*:5558"}'
#
# Then on the router's machine:
set -euo pipefail

NODES=(${NODES:-10.0.0.11 10.0.0.12 10.0.0.13 10.0.0.14})
ROUTER_PORT="${ROUTER_PORT:-30000}"
RADIXGATE="${RADIXGATE:-node $(cd "$(dirname "$0")/../.." && pwd)/dist/cli.js}"

urls=()
for node in "${NODES[@]}"; do urls+=("http://$node:30001"); done

# {host} is each worker's host: tcp://10.0.0.11:5557, replay on tcp://10.0.0.11:5558.
exec $RADIXGATE --host 0.0.0.0 --port "$ROUTER_PORT" \
  --worker-urls "${urls[@]}" \
  --kv-events \
  --kv-events-endpoint-template 'tcp://{host}:5557' \
  --kv-events-replay-template 'tcp://{host}:5558'
