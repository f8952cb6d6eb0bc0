#!/usr/bin/env bash
# AUTOMATIC1111's web UI, run for real with and without hipDiffusion's extension (issue 18's proof): a
# virtual environment with A1111's pinned requirements beside the PyTorch and hipdiffusion of build/venv
# (made by tools/python/test.sh; pip_beside_torch.py keeps pip from installing a second PyTorch), the
# repositories A1111 clones at its start (its own pinned commits; the URLs can be overridden with A1111's
# own variables, e.g. a local mirror), a random full-size SD1.x checkpoint (make_checkpoint.py --full:
# A1111 builds SD1.5's UNet from its own configuration) and a random LoRA for it (make_lora.py), then
# tools/integration/a1111_run.py.
# Nothing of A1111 is kept in this repository: pass a checkout (v1.10.1 is what this was run with).
# Offline (no huggingface.co): give HF_HOME a Hugging Face cache that holds openai/clip-vit-large-patch14's
# tokenizer and config, which A1111 reads at model load.
#   usage: tools/integration/a1111.sh A1111_DIR [cpu|gpu]
set -euo pipefail
cd "$(dirname "$0")/../.."
a1111=$(realpath "${1:?usage: tools/integration/a1111.sh A1111_DIR [cpu|gpu]}")
device=${2:-cpu}
[ -f "$a1111/launch.py" ] && [ -f "$a1111/modules/sd_unet.py" ] || { echo "$a1111 is not an AUTOMATIC1111 checkout" >&2; exit 1; }
[ -x build/venv/bin/python ] || { echo "build/venv is missing: run tools/python/test.sh first" >&2; exit 1; }

clone() {  # url folder commit: what A1111's prepare_environment does, without its pip installs
  [ -d "$a1111/repositories/$2" ] || git clone -q "$1" "$a1111/repositories/$2"
  [ "$(git -C "$a1111/repositories/$2" rev-parse HEAD)" = "$3" ] || git -C "$a1111/repositories/$2" checkout -q "$3"
}
mkdir -p "$a1111/repositories"
clone "${STABLE_DIFFUSION_REPO:-https://github.com/Stability-AI/stablediffusion.git}" stable-diffusion-stability-ai cf1d67a6fd5ea1aa600c4df58e5b47da45f6bdbf
clone "${STABLE_DIFFUSION_XL_REPO:-https://github.com/Stability-AI/generative-models.git}" generative-models 45c443b316737a4ab6e40413d7794a7f5657c19f
clone "${K_DIFFUSION_REPO:-https://github.com/crowsonkb/k-diffusion.git}" k-diffusion ab527a9a6d347f364e3d185ba6d714e22d80cb3c

venv=build/venv-a1111
bash tools/integration/venv_beside_torch.sh "$venv"
# A1111's pins, torchvision (A1111 installs it with PyTorch) and openai-clip (PyPI's copy of the CLIP
# that A1111 installs from GitHub; k-diffusion imports it).
"$venv/bin/python" tools/integration/pip_beside_torch.py "$venv/bin/python" "$a1111/requirements_versions.txt" \
  torchvision==0.29.2 openai-clip==1.0.1

checkpoint=build/integration/hd-random-sd15-full.safetensors
[ -f "$checkpoint" ] || build/venv/bin/python tools/integration/make_checkpoint.py --full --out "$checkpoint"
lora=build/integration/hd-random-lora.safetensors
[ -f "$lora" ] || build/venv/bin/python tools/integration/make_lora.py --out "$lora"
size=128
[ "$device" = gpu ] && size=512
"$venv/bin/python" tools/integration/a1111_run.py --a1111 "$a1111" --python "$PWD/$venv/bin/python" \
  --extension integrations/a1111 --checkpoint "$checkpoint" --lora "$lora" --out "build/integration/a1111-$device" \
  --device "$device" --size "$size"
