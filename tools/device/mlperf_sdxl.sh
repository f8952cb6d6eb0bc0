#!/usr/bin/env bash
# Run on the device machine: bench/mlperf_sdxl.py, LoadGen's Offline and Server scenarios for SDXL
# 1024x1024 (20 Euler steps, guidance 8, random weights of SDXL base's shapes), the engine through its C
# library and diffusers' StableDiffusionXLPipeline behind the same harness, on one GPU in one call. The
# wheels come from .whl (diffusers, importlib_metadata, zipp and mlcommons-loadgen for the device's
# Python). JSON and LoadGen's summaries in $OUT. DURATION (s, default 30) and QUERIES (default 32; diffusers'
# THEIR_QUERIES, 24) set each run's length;
# OURS_QPS / THEIRS_QPS the Server scenario's arrival rates; SKIP_DIFFUSERS=1 leaves diffusers out.
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
source "$(dirname "$0")/unpack_deps.sh"
SECONDS=0
cmake --preset cuda -DCMAKE_PREFIX_PATH=/tmp/deps/usr -DCMAKE_DISABLE_FIND_PACKAGE_PkgConfig=ON \
  ${cudnn_root:+-DHD_CUDNN_ROOT=$cudnn_root} -DCMAKE_CUDA_ARCHITECTURES=90 > "$OUT/configure.log" 2>&1 \
  || { tail -20 "$OUT/configure.log"; exit 1; }
cmake --build build/cuda -j 16 --target hipdiffusion hipdiffusion_c > "$OUT/build.log" 2>&1 \
  || { grep -E "error|FAILED" -A5 "$OUT/build.log" | head -40; exit 1; }
echo "build ${SECONDS}s"
source "$(dirname "$0")/runtime_env.sh"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  > "$OUT/pip.log" 2>&1 || { tail -5 "$OUT/pip.log"; exit 1; }
export PYTHONPATH=/tmp/site HD_TUNE_CACHE="$OUT/tuning.tsv"
model=/tmp/hipdiffusion-random-sdxl
# Writes SDXL base's shapes with random weights (and tunes the first image's shapes into the cache).
./build/cuda/hipdiffusion bench --arch sdxl --device cuda:0 --steps 20 --cfg-scale 8 --repeats 1 \
  > "$OUT/bench-sdxl.txt" 2>&1 || { tail -5 "$OUT/bench-sdxl.txt"; exit 1; }
echo "random model and first image ${SECONDS}s"
common=(--size 1024 --steps 20 --guidance 8 --samples 64 --min-duration "${DURATION:-30}" --min-queries "${QUERIES:-32}")
harness() {  # name, then the harness's own arguments
  local name=$1; shift
  # LoadGen's logs stay on the machine (the device tool brings back a limited number of files): its summary only.
  timeout 300 python3 bench/mlperf_sdxl.py "${common[@]}" --log-dir "/tmp/mlperf/$name" --json-out "$OUT/$name.json" \
    "$@" > "$OUT/$name.txt" 2>&1 || { echo "$name failed"; tail -5 "$OUT/$name.txt"; return; }
  cp "/tmp/mlperf/$name/mlperf_log_summary.txt" "$OUT/$name-summary.txt"
  python3 -c "import json; j = json.load(open('$OUT/$name.json')); print('$name', {k: j.get(k) for k in ('result', 'answered', 'samples_per_second', 'completed_samples_per_second', 'p50_latency_ns', 'p99_latency_ns', 'setup_s', 'early_stopping_met')})"
  echo "  ${SECONDS}s"
}
ours=(--backend hipdiffusion --lib build/cuda/libhipdiffusion.so --model "$model" --device cuda:0 --concurrency 8)
harness ours-offline "${ours[@]}" --scenario Offline --expected-qps 1.5
harness ours-server "${ours[@]}" --scenario Server --target-qps "${OURS_QPS:-1.0}" --latency-s 20
if [ "${SKIP_DIFFUSERS:-0}" != 1 ]; then
  theirs=(--backend diffusers --device cuda:0 --batch 1 --min-queries "${THEIR_QUERIES:-24}")
  harness diffusers-offline "${theirs[@]}" --scenario Offline --expected-qps 0.5
  harness diffusers-server "${theirs[@]}" --scenario Server --target-qps "${THEIRS_QPS:-0.4}" --latency-s 20
fi
