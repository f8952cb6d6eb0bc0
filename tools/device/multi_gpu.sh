#!/usr/bin/env bash
# On a device machine with two or more GPUs (nvidia-h100-x2 and up): builds the `cuda` preset's gpu tests,
# the CLI and bench/parallel_bench.cpp for sm_90 with NCCL (the system's, else the nvidia-nccl wheel that
# PyTorch brought), runs the collectives' and parallel generation's gpu tests, then the benchmarks: one GPU
# against all of them in the same run, for one request (CFG parallel, the exact image split, data parallel:
# hd_bench_parallel)
# and for the serving engine under load (a worker per GPU: hd_bench_serve --devices). Logs in $OUT.
#   ARCHS="sd15:512:5 sdxl:1024:3" (arch:size:repeats) STEPS=20 PER_GPU=4
#   SERVE=sd15:512 (arch:size) SERVE_CLIENTS=1,16 SERVE_IMAGES=48
#   GPU_TESTS=<gtest filter> STAGE=all|build|bench   the defaults (ARCHS="" or SERVE_CLIENTS="" leaves that benchmark out)
#   TEST_TIMEOUT, BENCH_TIMEOUT (s): a hung collective ends the tests or that benchmark, not the call
#   TAG=<word> added to the benchmarks' file names (a run under NCCL_P2P_DISABLE=1 beside one without)
set -euo pipefail
OUT=${OUT:-/tmp/out}
cd "$(dirname "$0")/../.."
source tools/device/unpack_deps.sh
nccl_root=""
if [ ! -e /usr/local/cuda/include/nccl.h ] && [ ! -e /usr/include/nccl.h ]; then
  nccl_root=$(python3 -c 'import nvidia.nccl as n; print(list(n.__path__)[0])' 2>/dev/null || true)
  [ -n "$nccl_root" ] && export LD_LIBRARY_PATH="$nccl_root/lib:$LD_LIBRARY_PATH"
fi
echo "NCCL root: ${nccl_root:-system}" | tee -a "$OUT/env.txt"
nvidia-smi topo -m > "$OUT/topology.txt" 2>&1 || true
stage=${STAGE:-all}
if [ "$stage" != bench ]; then
  cmake -S . -B build/multi -G Ninja -DHD_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DHD_SERVER=OFF \
    -DCMAKE_PREFIX_PATH=/tmp/deps/usr -DCMAKE_DISABLE_FIND_PACKAGE_PkgConfig=ON \
    ${cudnn_root:+-DHD_CUDNN_ROOT=$cudnn_root} ${nccl_root:+-DHD_NCCL_ROOT=$nccl_root} > "$OUT/configure.log" 2>&1 \
    || { tail -30 "$OUT/configure.log"; exit 1; }
  grep -E "NCCL|cuDNN" "$OUT/configure.log" | tee -a "$OUT/env.txt"
  start=$(date +%s)
  cmake --build build/multi --target hd_gpu_tests hd_bench_parallel hd_bench_serve hipdiffusion -j 32 > "$OUT/build.log" 2>&1 \
    || { grep -E "error|FAILED" -A5 "$OUT/build.log" | head -60; exit 1; }
  echo "built in $(( $(date +%s) - start )) s"
fi
source tools/device/runtime_env.sh
[ -n "$nccl_root" ] && export LD_LIBRARY_PATH="$nccl_root/lib:$LD_LIBRARY_PATH"
export HD_TUNE_CACHE=/tmp/multi_tuning.tsv
status=0
if [ "$stage" != bench ]; then
  timeout "${TEST_TIMEOUT:-600}" build/multi/tests/hd_gpu_tests --gtest_filter="${GPU_TESTS:-GpuNcclGroup.*:GpuInProcessGroup.*:GpuParallelGeneration.*}" \
    2>&1 | tee "$OUT/gpu-tests.log" | grep -E '^\[ *(OK|FAILED|PASSED|SKIPPED) |Failure|Expected|Which is' || status=1
  grep -q "FAILED" "$OUT/gpu-tests.log" && status=1
fi
if [ "$stage" != build ]; then
  for case in ${ARCHS-sd15:512:5 sdxl:1024:3}; do
    IFS=: read -r arch size repeats <<< "$case"
    timeout "${BENCH_TIMEOUT:-1800}" build/multi/hd_bench_parallel --arch "$arch" --size "$size" --steps "${STEPS:-20}" --repeats "$repeats" \
      --per-gpu "${PER_GPU:-4}" \
      --devices all --json-out "$OUT/parallel_${arch}_$size${TAG:+_$TAG}.json" 2>&1 | tee "$OUT/parallel_${arch}_$size${TAG:+_$TAG}.md" || status=1
  done
  if [ -n "${SERVE_CLIENTS-1,16}" ]; then
    IFS=: read -r arch size <<< "${SERVE:-sd15:512}"
    build/multi/hd_bench_serve --arch "$arch" --devices all --size "$size" --steps "${STEPS:-20}" \
      --clients "${SERVE_CLIENTS:-1,16}" --images "${SERVE_IMAGES:-48}" --json-out "$OUT/serve_devices_$arch.json" 2>&1 \
      | tee "$OUT/serve_devices_$arch.md" || status=1
  fi
fi
exit $status
