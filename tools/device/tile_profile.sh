#!/usr/bin/env bash
# On the device machine: Nsight Compute's view of one of our GEMM tiles on the kernel benchmark's 8192^3
# product (issue 21's mma.sync figure): throughputs, warp states, scheduler, instruction mix, and the
# sampled stalls by source line (tools/device/stalls_by_line.py), the tree built with -lineinfo.
# TILE: a regex on the kernel's demangled name (default: the best mma.sync tile, 256x128 in 8 warps,
# k-steps of 64, pipelined fragments, NVIDIA's 16x8 layout). TARGETS: more to build (hd_gpu_tests, say).
# Logs in $OUT.
#   TILE="Async3_128x128w8k64Pipelined, hd::gpu::Fragments16x8<.bool.0>" bash tools/device/tile_profile.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
source tools/device/unpack_deps.sh > /dev/null
tile=${TILE:-Async3_256x128w8k64Pipelined, hd::gpu::Fragments16x8<.bool.0>}
cmake -S . -B build/cuda -G Ninja -DCMAKE_BUILD_TYPE=Release -DHD_CUDA=ON -DHD_SERVER=OFF \
  -DCMAKE_PREFIX_PATH=/tmp/deps/usr -DCMAKE_DISABLE_FIND_PACKAGE_PkgConfig=ON ${cudnn_root:+-DHD_CUDNN_ROOT=$cudnn_root} \
  -DCMAKE_CUDA_FLAGS=-lineinfo -DCMAKE_CUDA_ARCHITECTURES=90 > "$OUT/tile-build.txt" 2>&1 &&
  ninja -C build/cuda -j "$(nproc)" hd_bench_gpu_kernels ${TARGETS:-} >> "$OUT/tile-build.txt" 2>&1 ||
  { grep -m3 -A5 error "$OUT/tile-build.txt"; exit 1; }
source tools/device/runtime_env.sh
bench=(./build/cuda/hd_bench_gpu_kernels --only matrix --case "GEMM 8192^3")
"${bench[@]}" 2>&1 | tee "$OUT/tile-bench.txt"
sections=()
for s in SpeedOfLight ComputeWorkloadAnalysis MemoryWorkloadAnalysis Occupancy LaunchStats WarpStateStats \
         SchedulerStats InstructionStats SourceCounters; do sections+=(--section "$s"); done
# The benchmark launches each candidate for its warm-up and its timed runs: the third launch is a warm one.
# The clocks are left alone (as gpu_profile.sh does), so the profile's duration compares with the benchmark's
# (ncu's default locks the SM clock at base: 1.37 GHz on an H200, 3.90 ms for a 3.58 ms kernel).
ncu --clock-control none "${sections[@]}" --kernel-name-base demangled -k "regex:$tile" --launch-skip 2 --launch-count 1 \
  -o "$OUT/tile" -f "${bench[@]}" > "$OUT/tile-ncu-stdout.txt" 2>&1 || { tail -20 "$OUT/tile-ncu-stdout.txt"; exit 1; }
ncu --import "$OUT/tile.ncu-rep" --page details > "$OUT/tile-details.txt" 2>&1
ncu --import "$OUT/tile.ncu-rep" --page source --csv --print-source cuda,sass > "$OUT/tile-source.csv" 2>/dev/null
python3 tools/device/stalls_by_line.py "$OUT/tile-source.csv" 40 > "$OUT/tile-stalls.txt" 2>&1
grep -E "Duration|Throughput|Registers|Achieved Occupancy|Issued Ipc|Warp Cycles Per Issued|Stall|No Eligible" \
  "$OUT/tile-details.txt" | head -60
head -45 "$OUT/tile-stalls.txt"
rm -f "$OUT/tile-source.csv" "$OUT/tile.ncu-rep"  # large; the tables above are what is kept
