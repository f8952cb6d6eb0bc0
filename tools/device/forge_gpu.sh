#!/usr/bin/env bash
# On the device machine, after tools/device/python_checks.sh built the extension on it (the machine still
# warm): Forge run headless on the GPU with and without hipDiffusion's extension, checked and timed by
# tools/integration/forge_run.py. The machine reaches no registry: Forge's source (forge.tar.gz, from a
# checkout after tools/integration/forge.sh cloned its repositories, less the model configurations
# other than SD1.5's, SD2.1's and SDXL base's; nothing of it in this repository) and the py3.12 wheels of Forge's pins that the
# machine's image lacks or holds at other versions (transformers 4.46, huggingface-hub 0.26, gradio 4.40,
# ...) travel in .forge/ (name it in the call's carry). The machine's own numpy, pillow, scipy and
# torchvision stand in for Forge's older pins. A random checkpoint is written there: SD1.5 with the whole
# UNet, or with ARCH=sdxl SDXL base (tools/integration/make_checkpoint.py).
#   ARCH=sd15 SIZE=512 (sdxl: 1024) STEPS=20 REPEATS=3   the defaults
set -euo pipefail
cd "$(dirname "$0")/../.."
source tools/device/runtime_env.sh
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/forge-site \
  .forge/whl/*.whl > "$OUT/forge_pip.log" 2>&1 || { tail "$OUT/forge_pip.log"; exit 1; }
rm -rf /tmp/forge && mkdir -p /tmp/forge && tar -xzf .forge/forge.tar.gz -C /tmp/forge
arch=${ARCH:-sd15} size=512
[ "$arch" = sdxl ] && size=1024
mkdir -p /tmp/checkpoints
checkpoint=/tmp/checkpoints/hd-random-$arch-full.safetensors
[ -f $checkpoint ] || PYTHONPATH=/tmp/site python3 tools/integration/make_checkpoint.py --full --arch "$arch" \
  --out $checkpoint 2>&1 | tail -1
export PYTHONPATH=$PWD/python:/tmp/forge-site HD_TUNE_CACHE=/tmp/forge_tuning.tsv PYTHONUNBUFFERED=1
python3 tools/integration/forge_run.py --forge /tmp/forge --python python3 --extension integrations/a1111 \
  --checkpoint $checkpoint --out "$OUT/forge-gpu-$arch" --device gpu --size "${SIZE:-$size}" --steps "${STEPS:-20}" \
  --repeats "${REPEATS:-3}" 2>&1 | tee "$OUT/forge-gpu-$arch.md"
