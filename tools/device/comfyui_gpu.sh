#!/usr/bin/env bash
# On the device machine, after tools/device/python_checks.sh built the extension on it (the machine still
# warm): ComfyUI run headless on the GPU with and without hipDiffusion's nodes, checked and timed by
# tools/integration/comfyui_run.py. The machine reaches no registry: ComfyUI's source (comfyui.tar.gz,
# from a checkout, nothing of it in this repository) and the wheels of what its image lacks travel in
# .comfy/ (name it in the call's carry), diffusers in .whl (python_checks.sh installed it in /tmp/site).
# A random checkpoint is written there (tools/integration/make_checkpoint.py): SD1.5 with the whole UNet,
# or with ARCH=sdxl SDXL base.
#   ARCH=sd15 SIZE=512 (sdxl: 1024) STEPS=20 REPEATS=3 DECODE_SIZE=1024   the defaults
set -euo pipefail
cd "$(dirname "$0")/../.."
source tools/device/runtime_env.sh
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/comfy-site \
  .comfy/whl/*.whl > "$OUT/comfy_pip.log" 2>&1 || { tail "$OUT/comfy_pip.log"; exit 1; }
rm -rf /tmp/comfyui && mkdir -p /tmp/comfyui /tmp/comfy-frontend && tar -xzf .comfy/comfyui.tar.gz -C /tmp/comfyui
mkdir -p /tmp/comfyui/custom_nodes /tmp/comfyui/models/checkpoints
ln -sfn "$PWD/integrations/comfyui" /tmp/comfyui/custom_nodes/comfyui-hipdiffusion
export PYTHONPATH=$PWD/python:/tmp/site:/tmp/comfy-site HD_TUNE_CACHE=/tmp/comfy_tuning.tsv PYTHONUNBUFFERED=1
arch=${ARCH:-sd15}
checkpoint=hd-random-$arch-full.safetensors size=512
[ "$arch" = sdxl ] && size=1024
mkdir -p /tmp/checkpoints  # outside /tmp/comfyui, which each call unpacks afresh
[ -f /tmp/checkpoints/$checkpoint ] || \
  python3 tools/integration/make_checkpoint.py --full --arch "$arch" --out /tmp/checkpoints/$checkpoint 2>&1 | tail -1
ln -sfn /tmp/checkpoints/$checkpoint /tmp/comfyui/models/checkpoints/$checkpoint
# --front-end-root: an empty folder stands in for the web front end (its package is not carried; the API
# needs none of it).
python3 tools/integration/comfyui_run.py --comfyui /tmp/comfyui --python python3 --checkpoint $checkpoint \
  --out "$OUT/comfyui-gpu-$arch" --device gpu --size "${SIZE:-$size}" --steps "${STEPS:-20}" --repeats "${REPEATS:-3}" \
  --decode-size "${DECODE_SIZE:-1024}" --comfyui-args "--front-end-root /tmp/comfy-frontend" 2>&1 | tee "$OUT/comfyui-gpu-$arch.md"
