#!/usr/bin/env bash
# On the device machine: the checked-out tree ("tree") and each variant packed by
# tools/device/pack_variant.sh (.variant-NAME.tar.gz) built side by side, each variant's GPU tests run
# (TESTS: a gtest filter, '*' by default; TESTS= skips them), then hd_bench_gpu_kernels $BENCH of every
# build in alternating rounds, so that the machine's drift falls on all of them alike. Every command has a
# time limit: a variant that hangs loses its lines, not the call. CUDA_FLAGS: nvcc flags for every build
# (-lineinfo for a profiler's source page). Logs in $OUT.
#   BENCH="--only backward" ROUNDS=3 TESTS='*Attention*:*Convert*' bash tools/device/compare_builds.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
source tools/device/unpack_deps.sh > /dev/null
bench=${BENCH:---only backward} rounds=${ROUNDS:-3} tests=${TESTS-*}
names=(tree) dirs=(.)
for pack in .variant-*.tar.gz; do
  [ -e "$pack" ] || continue
  name=${pack#.variant-}; name=${name%.tar.gz}
  mkdir -p "/tmp/variant-$name" && tar -xzf "$pack" -C "/tmp/variant-$name" || exit 1
  names+=("$name") dirs+=("/tmp/variant-$name")
done
targets=hd_bench_gpu_kernels
[ -n "$tests" ] && targets="$targets hd_gpu_tests"
jobs=$(( $(nproc) / ${#names[@]} ))
for i in "${!names[@]}"; do
  (cmake -S "${dirs[$i]}" -B "${dirs[$i]}/build/cuda" -G Ninja -DCMAKE_BUILD_TYPE=Release -DHD_CUDA=ON -DHD_SERVER=OFF \
     -DCMAKE_PREFIX_PATH=/tmp/deps/usr -DCMAKE_DISABLE_FIND_PACKAGE_PkgConfig=ON ${cudnn_root:+-DHD_CUDNN_ROOT=$cudnn_root} \
     ${CUDA_FLAGS:+"-DCMAKE_CUDA_FLAGS=$CUDA_FLAGS"} \
     -DCMAKE_CUDA_ARCHITECTURES=90 > "$OUT/build-${names[$i]}.txt" 2>&1 &&
   ninja -C "${dirs[$i]}/build/cuda" -j "$jobs" $targets >> "$OUT/build-${names[$i]}.txt" 2>&1) &
done
wait
source tools/device/runtime_env.sh
for i in "${!names[@]}"; do
  [ -x "${dirs[$i]}/build/cuda/hd_bench_gpu_kernels" ] || { echo "${names[$i]}: build failed"; grep -m3 -A5 error "$OUT/build-${names[$i]}.txt"; }
done
if [ -n "$tests" ]; then
  for i in "${!names[@]}"; do
    echo "== ${names[$i]}: tests"
    timeout 150 "${dirs[$i]}/build/cuda/tests/hd_gpu_tests" --gtest_filter="$tests" 2>&1 \
      | grep -E "OK \]|PASSED|FAILED|Failure|rror| dq| dk| dv" || echo "(no output: failed to build, or timed out)"
  done 2>&1 | tee "$OUT/tests.txt"
fi
for round in $(seq "$rounds"); do
  for i in "${!names[@]}"; do
    echo "== ${names[$i]}, round $round"
    timeout 120 "${dirs[$i]}/build/cuda/hd_bench_gpu_kernels" $bench 2>&1 | grep -vE "^$|^#" || echo "(timed out or failed)"
  done
done 2>&1 | tee "$OUT/rounds.txt"
