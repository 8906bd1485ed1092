#!/usr/bin/env bash
# Example: radixgate in front of four vLLM servers on one 4-GPU machine (bare metal, no
# containers), one replica per GPU. Adapt MODEL, the GPU list and the ports.
#
# Needs: `pip install vllm` (see https://docs.vllm.ai), the model's weights (or HF_TOKEN for gated
# models), and radixgate built (`npm ci && npm run build` in this repository).
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

urls=()
for i in "${!GPUS[@]}"; do
  port=$(( BASE_PORT + i ))
  # One vLLM OpenAI-compatible server per GPU. --enable-prefix-caching turns on automatic prefix
  # caching (the default in recent vLLM releases; explicit here because cache-aware routing only
  # pays off with it). --gpu-memory-utilization bounds weights + KV cache (default 0.9).
  # /metrics (Prometheus) is served by default.
  CUDA_VISIBLE_DEVICES="${GPUS[$i]}" vllm serve "$MODEL" \
    --host 127.0.0.1 \
    --port "$port" \
    --enable-prefix-caching \
    --gpu-memory-utilization 0.9 \
    > "vllm-$port.log" 2>&1 &
  pids+=($!)
  urls+=("http://127.0.0.1:$port")
done

for url in "${urls[@]}"; do
  until curl -sf "$url/health" > /dev/null; do sleep 5; done
  echo "ready: $url"
done

# The router with its defaults: the prefix_cost policy (README) over the four replicas.
$RADIXGATE \
  --host 0.0.0.0 \
  --port "$ROUTER_PORT" \
  --worker-urls "${urls[@]}" &
pids+=($!)

echo "radixgate on http://0.0.0.0:$ROUTER_PORT in front of: ${urls[*]}"
wait -n
