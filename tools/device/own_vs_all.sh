#!/usr/bin/env bash
# Run on the device machine: our own kernels beside the vendor libraries' in one run on one GPU, the
# measure of issue 21. Builds the `cuda` preset (hipdiffusion and the tests) and runs the gpu tests
# (TESTS=0: none; TESTS=<gtest filter>: only those of hd_gpu_tests, and only what they need is built).
# KERNELS=<section> (matrix, attention, norm): times every tile of the kernel benchmark's section
# (--every-tile). Then `hipdiffusion bench --kernels own` and `--kernels all` for SD1.5 (unless SD15=0)
# and SDXL's UNet and VAE (unless SDXL=0), each with a tuning cache of its own, interleaved, ROUNDS times
# (2); the medians in $OUT/summary.txt. BASELINE=DIR: also build the same sources with DIR's files laid
# over src/ops/gpu/ (the kernels before a change) and bench it with --kernels own between the others;
# BASELINE_TREE=FILE.tar.gz: the same with a whole earlier tree instead (`git archive HEAD -- .
# ':!tests/fixtures' ':!models' | gzip > .baseline.tar.gz`, for changes that add or move files), benched
# with both --kernels own and all (and fragments, with FRAGMENTS=1).
# ALL=0: no `--kernels all` runs (the libraries' column, where a change cannot move it).
# FRAGMENTS=1: also `--kernels fragments` (our kernels without Hopper's warpgroup ones: the fragment layer
# that NVIDIA GPUs before Hopper run and AMD's matrix-core kernels mirror), after each `all` run.
# CUDA_ARCHS=90: build for that architecture only (the preset builds sm_80 and sm_90). Logs and JSON in
# $OUT.
set -uo pipefail
OUT=${OUT:-/tmp/out}
source "$(dirname "$0")/unpack_deps.sh"
conf="-DCMAKE_PREFIX_PATH=/tmp/deps/usr -DCMAKE_DISABLE_FIND_PACKAGE_PkgConfig=ON ${cudnn_root:+-DHD_CUDNN_ROOT=$cudnn_root}"
conf="$conf ${CUDA_ARCHS:+-DCMAKE_CUDA_ARCHITECTURES=$CUDA_ARCHS}"
SECONDS=0
cmake --preset cuda $conf > "$OUT/configure.log" 2>&1 || { tail -20 "$OUT/configure.log"; exit 1; }
case "${TESTS:-1}" in
  0) targets="--target hipdiffusion ${KERNELS:+hd_bench_gpu_kernels}" ;;
  1) targets="" ;;
  *) targets="--target hipdiffusion hd_gpu_tests ${KERNELS:+hd_bench_gpu_kernels}" ;;
esac
cmake --build --preset cuda -j 16 $targets > "$OUT/build.log" 2>&1 || { grep -E "error|FAILED" -A5 "$OUT/build.log" | head -60; exit 1; }
echo "build ${SECONDS}s"
if [ -n "${KERNELS:-}" ]; then
  ./build/cuda/hd_bench_gpu_kernels --every-tile --only "$KERNELS" > "$OUT/kernels-$KERNELS.txt" 2>&1
  echo "kernel bench ($KERNELS) rc=$? ${SECONDS}s"
fi
case "${TESTS:-1}" in
  0) ;;
  1) ctest --preset cuda-gpu --output-on-failure > "$OUT/ctest-gpu.log" 2>&1
     echo "gpu tests rc=$? ${SECONDS}s: $(grep 'tests passed' "$OUT/ctest-gpu.log")" ;;
  *) ./build/cuda/tests/hd_gpu_tests --gtest_filter="$TESTS" > "$OUT/gpu-tests.log" 2>&1
     echo "gpu tests ($TESTS) rc=$? ${SECONDS}s: $(grep -E 'PASSED|FAILED' "$OUT/gpu-tests.log" | head -5 | tr '\n' ' ')" ;;
esac
builds=(build/cuda)
if [ -n "${BASELINE:-}" ] || [ -n "${BASELINE_TREE:-}" ]; then
  rm -rf /tmp/baseline && mkdir /tmp/baseline
  if [ -n "${BASELINE_TREE:-}" ]; then
    tar -xzf "$BASELINE_TREE" -C /tmp/baseline
  else
    tar -c --exclude=./build --exclude=./.git --exclude=./.deps . | tar -x -C /tmp/baseline
    cp "$BASELINE"/* /tmp/baseline/src/ops/gpu/
  fi
  (cd /tmp/baseline && cmake --preset cuda $conf > "$OUT/configure-baseline.log" 2>&1 &&
    cmake --build --preset cuda -j 16 --target hipdiffusion > "$OUT/build-baseline.log" 2>&1) ||
    { tail -30 "$OUT/build-baseline.log"; exit 1; }
  echo "baseline build ${SECONDS}s"
  builds+=(/tmp/baseline/build/cuda)
fi
bench() {  # build kernels name arch [flags]
  local build=$1 kernels=$2 name=$3 arch=$4; shift 4
  HD_TUNE_CACHE="$OUT/tuning-$name.tsv" "$build/hipdiffusion" bench --arch "$arch" --device cuda:0 --kernels "$kernels" \
    "$@" --json > "$OUT/$name.json" 2> "$OUT/$name.err" || { echo "$name failed"; tail -5 "$OUT/$name.err"; return; }
  python3 -c "import json; j = json.load(open('$OUT/$name.json')); print('$name', {k: round(v, 2) for k, v in j.items() if k.endswith('_ms') and isinstance(v, (int, float))})" | tee -a "$OUT/summary.txt"
}
baseline=${BASELINE:-}${BASELINE_TREE:-}
[ "${SD15:-1}" != 0 ] && for round in $(seq "${ROUNDS:-2}"); do
  bench build/cuda own "sd15-own-$round" sd15 --steps 20 --repeats 5
  [ -n "$baseline" ] && bench /tmp/baseline/build/cuda own "sd15-baseline-own-$round" sd15 --steps 20 --repeats 5
  [ "${ALL:-1}" != 0 ] && bench build/cuda all "sd15-all-$round" sd15 --steps 20 --repeats 5
  [ "${FRAGMENTS:-0}" != 0 ] && bench build/cuda fragments "sd15-fragments-$round" sd15 --steps 20 --repeats 5
  [ -n "${BASELINE_TREE:-}" ] && [ "${ALL:-1}" != 0 ] &&
    bench /tmp/baseline/build/cuda all "sd15-baseline-all-$round" sd15 --steps 20 --repeats 5
  [ -n "${BASELINE_TREE:-}" ] && [ "${FRAGMENTS:-0}" != 0 ] &&
    bench /tmp/baseline/build/cuda fragments "sd15-baseline-fragments-$round" sd15 --steps 20 --repeats 5
done
if [ "${SDXL:-1}" != 0 ]; then
  bench build/cuda own sdxl-own sdxl --steps 10 --repeats 3
  [ -n "$baseline" ] && bench /tmp/baseline/build/cuda own sdxl-baseline-own sdxl --steps 10 --repeats 3
  [ "${ALL:-1}" != 0 ] && bench build/cuda all sdxl-all sdxl --steps 10 --repeats 3
  [ "${FRAGMENTS:-0}" != 0 ] && bench build/cuda fragments sdxl-fragments sdxl --steps 10 --repeats 3
  [ -n "${BASELINE_TREE:-}" ] && [ "${ALL:-1}" != 0 ] &&
    bench /tmp/baseline/build/cuda all sdxl-baseline-all sdxl --steps 10 --repeats 3
  [ -n "${BASELINE_TREE:-}" ] && [ "${FRAGMENTS:-0}" != 0 ] &&
    bench /tmp/baseline/build/cuda fragments sdxl-baseline-fragments sdxl --steps 10 --repeats 3
fi
echo "done ${SECONDS}s"
