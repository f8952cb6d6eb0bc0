#!/usr/bin/env bash
# On the device machine: Nsight Compute's section metrics (throughputs, pipes, memory, warp states,
# instructions) of our attention gradient kernel and of cuDNN's SDPA backward kernel on the same shape, in
# one process (tools/device/gradient_pair.py), side by side (tools/device/ncu_side_by_side.py). Builds the
# PyTorch extension first (python_checks.sh). SHAPE="--tokens 4096 --heads 10 --head-dim 64" by default
# (SDXL's 64x64 self-attention); NAME=... names the logs in $OUT (gradient_metrics by default).
set -uo pipefail
cd "$(dirname "$0")/../.."
NO_TESTS=1 NO_BENCH=1 bash tools/device/python_checks.sh || exit 1
source tools/device/runtime_env.sh
name=${NAME:-gradient_metrics}
export PYTHONPATH=$PWD/python:/tmp/site
sections=()
for s in SpeedOfLight ComputeWorkloadAnalysis MemoryWorkloadAnalysis Occupancy LaunchStats WarpStateStats \
         SchedulerStats InstructionStats; do sections+=(--section "$s"); done
ncu --csv --page details "${sections[@]}" -k 'regex:wgmma_gradient_kernel|attention_gradient|bprop' \
  python3 tools/device/gradient_pair.py ${SHAPE:---tokens 4096 --heads 10 --head-dim 64} \
  > "$OUT/$name.csv" 2> "$OUT/$name-stderr.txt" || { tail -20 "$OUT/$name-stderr.txt"; exit 1; }
python3 tools/device/ncu_side_by_side.py "$OUT/$name.csv" 'ours=gradient_kernel|attention_gradient' 'cudnn=bprop' \
  | tee "$OUT/$name.md"
