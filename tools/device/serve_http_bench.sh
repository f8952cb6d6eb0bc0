#!/usr/bin/env bash
# On the device machine: `hipdiffusion serve` under load through HTTP, batching across requests on and
# off, beside the CLI's own in-process time for the same image. Builds the CLI (with its server) for sm_90
# against the Debian packages carried in .deps/ (cpp-httplib, brotli, OpenSSL among them), writes random
# SD1.5 weights (the CLI's bench), times `hipdiffusion bench` (the in-process whole image), then runs
# bench/serve_http_bench.py against a server started with and without --no-batching. Logs in $OUT.
#   SIZE=512 STEPS=20 CLIENTS=1,4,16 IMAGES=32   the defaults
set -euo pipefail
OUT=${OUT:-/tmp/out}
cd "$(dirname "$0")/../.."
source tools/device/unpack_deps.sh
cmake -S . -B build/serve-http -G Ninja -DHD_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DHD_BUILD_TESTS=OFF \
  -DHD_BUILD_BENCH=OFF -DCMAKE_PREFIX_PATH=/tmp/deps/usr -DCMAKE_DISABLE_FIND_PACKAGE_PkgConfig=ON \
  ${cudnn_root:+-DHD_CUDNN_ROOT=$cudnn_root} > "$OUT/configure.log" 2>&1 || { tail -30 "$OUT/configure.log"; exit 1; }
start=$(date +%s)
cmake --build build/serve-http --target hipdiffusion -j 16 > "$OUT/build.log" 2>&1 \
  || { grep -E "error|FAILED" -A5 "$OUT/build.log" | head -60; exit 1; }
echo "built in $(( $(date +%s) - start )) s"
source tools/device/runtime_env.sh
export HD_TUNE_CACHE=/tmp/serve_tuning.tsv
hd=build/serve-http/hipdiffusion
size=${SIZE:-512} steps=${STEPS:-20}
$hd bench --arch sd15 --device cuda:0 --steps "$steps" --width "$size" --height "$size" --sampler euler \
  --cfg-scale 7 --repeats 5 > "$OUT/cli_bench.md" 2> "$OUT/cli_bench.log" || { tail "$OUT/cli_bench.log"; exit 1; }
grep -E "whole image|UNet step" "$OUT/cli_bench.md"
model=$(sed -n 's/.*random sd15 weights in \(.*\)$/\1/p' "$OUT/cli_bench.log" | head -1)
for mode in on off; do
  flags=""; [ $mode = off ] && flags=--no-batching
  $hd serve --model "$model" --device cuda:0 --port 7860 --max-queue 128 $flags > "$OUT/serve_$mode.log" 2>&1 &
  pid=$!
  for _ in $(seq 300); do grep -q "listening on" "$OUT/serve_$mode.log" && break; sleep 0.2; done
  python3 bench/serve_http_bench.py --url http://127.0.0.1:7860 --clients "${CLIENTS:-1,4,16}" \
    --images "${IMAGES:-32}" --size "$size" --steps "$steps" --label "batching $mode" \
    --json-out "$OUT/serve_http_$mode.json" | tee "$OUT/serve_http_$mode.md"
  kill -TERM $pid; wait $pid || true
done
