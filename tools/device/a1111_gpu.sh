#!/usr/bin/env bash
# On the device machine, after tools/device/python_checks.sh built the extension on it (the machine still
# warm): AUTOMATIC1111 run headless on the GPU with and without hipDiffusion's extension, checked and
# timed by tools/integration/a1111_run.py. The machine reaches no registry and has Python 3.12 only, for
# which A1111 v1.10.1's transformers 4.30.2 has no tokenizers wheel: .a1111/ (name it in the call's
# carry) holds A1111's source with the repositories it clones (a1111.tar.gz, nothing of it in this
# repository), a Hugging Face cache with CLIP ViT-L/14's tokenizer and config (hf.tar.gz), and py3.12
# wheels of A1111's pins, with transformers 4.46.1 (tokenizers 0.20) in place of 4.30.2; the machine's own
# numpy, pillow and scipy stand in for A1111's older pins. A random checkpoint is written: SD1.5 (with a
# random LoRA for it) or, with ARCH=sdxl, SDXL base (no LoRA: make_lora.py writes SD1.x's).
#   ARCH=sd15 SIZE=512 (sdxl: 1024) STEPS=20 REPEATS=3   the defaults
set -euo pipefail
cd "$(dirname "$0")/../.."
source tools/device/runtime_env.sh
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/a1111-site \
  .a1111/whl/*.whl > "$OUT/a1111_pip.log" 2>&1 || { tail "$OUT/a1111_pip.log"; exit 1; }
rm -rf /tmp/a1111 /tmp/a1111-hf && mkdir -p /tmp/a1111 && tar -xzf .a1111/a1111.tar.gz -C /tmp/a1111
tar -xzf .a1111/hf.tar.gz -C /tmp
arch=${ARCH:-sd15} size=512 lora=
[ "$arch" = sdxl ] && size=1024
mkdir -p /tmp/checkpoints
checkpoint=/tmp/checkpoints/hd-random-$arch-full.safetensors
[ -f $checkpoint ] || PYTHONPATH=/tmp/site python3 tools/integration/make_checkpoint.py --full --arch "$arch" \
  --out $checkpoint 2>&1 | tail -1
if [ "$arch" = sd15 ]; then
  lora=/tmp/checkpoints/hd-random-lora.safetensors
  [ -f $lora ] || python3 tools/integration/make_lora.py --out $lora
fi
export PYTHONPATH=$PWD/python:/tmp/a1111-site HF_HOME=/tmp/a1111-hf HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1 \
  HD_TUNE_CACHE=/tmp/a1111_tuning.tsv
python3 tools/integration/a1111_run.py --a1111 /tmp/a1111 --python python3 --extension integrations/a1111 \
  --checkpoint $checkpoint ${lora:+--lora $lora} --out "$OUT/a1111-gpu-$arch" --device gpu --size "${SIZE:-$size}" \
  --steps "${STEPS:-20}" --repeats "${REPEATS:-3}" 2>&1 | tee "$OUT/a1111-gpu-$arch.md"
