#!/usr/bin/env bash
# On the device machine: the serving engine's GPU checks and its load benchmark. Builds the `cuda` preset's
# gpu tests and bench/serve_bench.cpp for sm_90 against the Debian packages carried in .deps/
# (unpack_deps.sh), runs the batched-denoising and pipeline gpu tests, then hd_bench_serve on random
# SD1.5 weights (1, 4 and 16 clients, batching across requests off and on). Logs in $OUT.
#   SIZE=512 STEPS=20 CLIENTS=1,4,16 IMAGES=32   the defaults
set -euo pipefail
OUT=${OUT:-/tmp/out}
cd "$(dirname "$0")/../.."
source tools/device/unpack_deps.sh
cmake -S . -B build/serve -G Ninja -DHD_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH=/tmp/deps/usr \
  -DCMAKE_DISABLE_FIND_PACKAGE_PkgConfig=ON ${cudnn_root:+-DHD_CUDNN_ROOT=$cudnn_root} > "$OUT/configure.log" 2>&1 \
  || { tail -30 "$OUT/configure.log"; exit 1; }
start=$(date +%s)
cmake --build build/serve --target hd_gpu_tests hd_bench_serve -j 16 > "$OUT/build.log" 2>&1 \
  || { grep -E "error|FAILED" -A5 "$OUT/build.log" | head -60; exit 1; }
echo "built in $(( $(date +%s) - start )) s"
source tools/device/runtime_env.sh
export HD_TUNE_CACHE=/tmp/serve_tuning.tsv
status=0
build/serve/tests/hd_gpu_tests --gtest_filter='GpuDenoisingRun.*:GpuPipeline.TinyPipelinesMatchDiffusersRecordedRuns' \
  2>&1 | tee "$OUT/gpu-tests.log" | grep -E '^\[ *(OK|FAILED|PASSED) ' || status=1
build/serve/hd_bench_serve --arch sd15 --device cuda:0 --size "${SIZE:-512}" --steps "${STEPS:-20}" \
  --clients "${CLIENTS:-1,4,16}" --images "${IMAGES:-32}" --json-out "$OUT/serve_bench.json" 2>&1 | tee "$OUT/serve_bench.md" \
  || status=1
exit $status
