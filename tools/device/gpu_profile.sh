#!/usr/bin/env bash
# Run on the device machine after tools/device/gpu_bench.sh (whose autotuner cache, $OUT/tuning.tsv,
# keeps the timing launches out of the profile): Nsight Compute's duration of every kernel of two plain
# SD1.5 UNet forwards (batch 2, 64x64, f16), grouped by what they compute (tools/device/profile_summary.py).
# ncu runs the kernels one at a time with the clocks and caches left alone, so the sum is GPU time without
# launch gaps or overlap. Logs in $OUT.
set -uo pipefail
OUT=${OUT:-/tmp/out}
source "$(dirname "$0")/runtime_env.sh"
export HD_TUNE_CACHE="$OUT/tuning.tsv"
ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv \
  ./build/cuda/hd_bench_unet_step 1 64 cuda:0 f16 > "$OUT/ncu.csv" 2> "$OUT/ncu-stderr.txt"
python3 tools/device/profile_summary.py "$OUT/ncu.csv" 2 2>&1 | tee "$OUT/profile.txt"
