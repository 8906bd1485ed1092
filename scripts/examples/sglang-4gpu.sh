#!/usr/bin/env bash
# Example: radixgate in front of four SGLang servers on one 4-GPU machine (bare metal, no
# containers), one data-parallel replica per GPU. Adapt MODEL, the GPU list and the ports.
#
# Needs: `pip install "sglang[all]"` (see https://docs.sglang.ai), the model's weights (or
# HF_TOKEN for gated models), and radixgate built (`npm ci && npm run build` in this repository).
set -euo pipefail

MODEL="${MODEL:-meta-llama/Llama-3.1-8B-Instruct}"
GPUS=(0 1 2 3)
BASE_PORT="${BASE_PORT:-30001}"
ROUTER_PORT="${ROUTER_PORT:-30000}"
RADIXGATE="${RADIXGATE:-node $(cd "$(dirname "$0")/../.." && pwd)/dist/cli.js}"

pids=()
cleanup() {
  # Stop the router first (it drains in-flight requests), then the engines.
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait || true
}
trap cleanup EXIT INT TERM

urls=()
for i in "${!GPUS[@]}"; do
  port=$(( BASE_PORT + i ))
  # One SGLang server per GPU. Its radix cache (prefix caching) is on by default; --enable-metrics
  # exposes /metrics (queue length, cache hit rate) for your Prometheus next to radixgate's.
  # --mem-fraction-static is the share of GPU memory for weights + KV cache (default 0.9).
  CUDA_VISIBLE_DEVICES="${GPUS[$i]}" python -m sglang.launch_server \
    --model-path "$MODEL" \
    --host 127.0.0.1 \
    --port "$port" \
    --mem-fraction-static 0.88 \
    --enable-metrics \
    > "sglang-$port.log" 2>&1 &
  pids+=($!)
  urls+=("http://127.0.0.1:$port")
done

# Loading weights and capturing CUDA graphs takes a while: wait for every /health to answer 200.
for url in "${urls[@]}"; do
  until curl -sf "$url/health" > /dev/null; do sleep 5; done
  echo "ready: $url"
done

# The router: its default policy (prefix_cost, see the README) over the four replicas. Health
# checks keep probing /health; add --api-key to require a bearer token on /v1/*, and keep the
# admin API on loopback (or set --admin-api-key) before exposing 0.0.0.0.
$RADIXGATE \
  --host 0.0.0.0 \
  --port "$ROUTER_PORT" \
  --worker-urls "${urls[@]}" &
pids+=($!)

echo "radixgate on http://0.0.0.0:$ROUTER_PORT in front of: ${urls[*]}"
wait -n
