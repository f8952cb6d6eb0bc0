#!/usr/bin/env bash
# Run on the device machine after tools/device/gpu_checks.sh (which builds build/cuda): the kernel
# benchmarks beside PyTorch's (KERNELS=0 skips them), the UNet steps (SD1.5, SDXL) and whole generations
# beside diffusers' (numbers also in $OUT/compare.json, which tools/plot_stages.py draws), `hipdiffusion
# bench` with SDXL's profile and under a device memory limit, and a generation through the CLI, all in
# one session on one GPU. Logs in $OUT. diffusers comes from wheels carried in .whl (README, "Building for GPUs").
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
source "$(dirname "$0")/runtime_env.sh"
export HD_TUNE_CACHE="$OUT/tuning.tsv"
if [ "${KERNELS:-1}" != 0 ]; then
  ./build/cuda/hd_bench_gpu_kernels 2>&1 | tee "$OUT/bench-kernels.txt"
  python3 bench/torch_peers.py 2>&1 | tee "$OUT/bench-torch.txt"
fi
if ls .whl/*.whl > /dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  PYTHONPATH=/tmp/site python3 bench/compare_diffusers.py ${COMPARE_FLAGS:-} --json-out "$OUT/compare.json" 2>&1 \
    | tee "$OUT/bench-diffusers.txt"
fi
# The harness on its own for the architectures not compared above (SD2.1 here), table form.
./build/cuda/hipdiffusion bench --arch sd21 --device cuda:0 2>&1 | tee "$OUT/bench-sd21.txt"
# The VAE's automatic fallback in a real pipeline: at 1024x1024 with 3.6 GiB allowed, SD1.5's UNet fits
# and its whole decode does not, so the exact tiles take over (the output notes it).
./build/cuda/hipdiffusion bench --arch sd15 --device cuda:0 --width 1024 --height 1024 --steps 2 --repeats 3 \
  --max-device-memory 3.6 2>&1 | tee "$OUT/bench-vae-fallback.txt"
# SDXL's UNet and VAE op by op: where its step's time goes.
./build/cuda/hipdiffusion bench --arch sdxl --device cuda:0 --steps 5 --repeats 2 --profile 2>&1 \
  | tee "$OUT/bench-sdxl.txt"
{
  /usr/bin/time -v ./build/cuda/hipdiffusion generate --device cuda:0 --prompt "a red circle on a blue background, top left" \
    --output "$OUT/default-model-gpu.png"
  ./build/cuda/hipdiffusion generate --device cuda:0 --prompt "a red circle on a blue background, top left" \
    --output "$OUT/default-model-gpu-second.png"
} 2>&1 | grep -E "model:|Elapsed|Maximum resident|note|error|png" | tee "$OUT/cli-gpu.txt"
cp "$OUT/tuning.tsv" "$OUT/tuning-choices.txt" 2>/dev/null || true
