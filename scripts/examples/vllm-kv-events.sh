#!/usr/bin/env bash
# Example: radixgate routing on vLLM's KV-cache events (docs/kv-events.md), four vLLM servers on
# one 4-GPU machine. Each engine publishes its KV events on a ZMQ PUB socket (5557 + i) and keeps
# the last batches for replay on a ROUTER socket (5657 + i); the router subscribes to both.
#
# Needs: `pip install vllm`, the model's weights, radixgate built (`npm ci && npm run build`).
# vLLM's option: --kv-events-config (vllm/config/kv_events.py KVEventsConfig: enable_kv_cache_events,
# publisher, endpoint, replay_endpoint, buffer_steps, topic).
set -euo pipefail

MODEL="${MODEL:-meta-llama/Llama-3.1-8B-Instruct}"
GPUS=(0 1 2 3)
BASE_PORT="${BASE_PORT:-8001}"
ROUTER_PORT="${ROUTER_PORT:-8000}"
RADIXGATE="${RADIXGATE:-node $(cd "$(dirname "$0")/../.." && pwd)/dist/cli.js}"

pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait || true
}
trap cleanup EXIT INT TERM

for i in "${!GPUS[@]}"; do
  port=$(( BASE_PORT + i ))
  events="{\"enable_kv_cache_events\": true, \"publisher\": \"zmq\", \"endpoint\": \"tcp://*:$(( 5557 + i ))\", \"replay_endpoint\": \"tcp://*:$(( 5657 + i ))\"}"
  CUDA_VISIBLE_DEVICES="${GPUS[$i]}" vllm serve "$MODEL" \
    --host 127.0.0.1 --port "$port" \
    --enable-prefix-caching \
    --kv-events-config "$events" \
    > "vllm-$port.log" 2>&1 &
  pids+=($!)
done

for i in "${!GPUS[@]}"; do
  until curl -sf "http://127.0.0.1:$(( BASE_PORT + i ))/health" > /dev/null; do sleep 5; done
done

# Every engine is on the same host, so the endpoint templates cannot name the port: the workers
# are added through the admin API, each with its own endpoints.
$RADIXGATE --host 0.0.0.0 --port "$ROUTER_PORT" \
  --kv-events --kv-events-endpoint-template "" &
pids+=($!)
until curl -sf "http://127.0.0.1:$ROUTER_PORT/health" > /dev/null; do sleep 1; done
for i in "${!GPUS[@]}"; do
  curl -sf "http://127.0.0.1:$ROUTER_PORT/workers" -H 'content-type: application/json' -d "{
    \"url\": \"http://127.0.0.1:$(( BASE_PORT + i ))\",
    \"kv_events_endpoint\": \"tcp://127.0.0.1:$(( 5557 + i ))\",
    \"kv_events_replay_endpoint\": \"tcp://127.0.0.1:$(( 5657 + i ))\"}" > /dev/null
done
echo "radixgate on http://0.0.0.0:$ROUTER_PORT; event streams: curl -s localhost:$ROUTER_PORT/workers"
wait -n
