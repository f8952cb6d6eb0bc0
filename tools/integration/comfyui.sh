#!/usr/bin/env bash
# ComfyUI, run for real with and without hipDiffusion's nodes (issue 18's proof): a virtual environment
# with ComfyUI's requirements beside the PyTorch and hipdiffusion of build/venv (made by
# tools/python/test.sh), the node package linked into the checkout's custom_nodes, a random SD1.x
# checkpoint (tools/integration/make_checkpoint.py) in its models/checkpoints, then
# tools/integration/comfyui_run.py. Nothing of ComfyUI is kept in this repository: pass a checkout.
#   usage: tools/integration/comfyui.sh COMFYUI_DIR [cpu|gpu] [--full]
set -euo pipefail
cd "$(dirname "$0")/../.."
comfy=$(realpath "${1:?usage: tools/integration/comfyui.sh COMFYUI_DIR [cpu|gpu] [--full]}")
device=${2:-cpu}
full=${3:-}
[ -f "$comfy/main.py" ] || { echo "$comfy is not a ComfyUI checkout (no main.py)" >&2; exit 1; }
[ -x build/venv/bin/python ] || { echo "build/venv is missing: run tools/python/test.sh first" >&2; exit 1; }

venv=build/venv-comfyui
bash tools/integration/venv_beside_torch.sh "$venv"
# ComfyUI's requirements, less PyTorch itself (build/venv's is used; torchvision and torchaudio too
# where it has them).
grep -v -E '^(torch|torchvision|torchaudio)([<>=~ ].*)?$' "$comfy/requirements.txt" | grep -v -E '^\s*(#|$)' \
  > build/comfyui-requirements.txt
"$venv/bin/pip" install -q --disable-pip-version-check -r build/comfyui-requirements.txt

ln -sfn "$PWD/integrations/comfyui" "$comfy/custom_nodes/comfyui-hipdiffusion"
name=hd-random-sd15${full:+-full}.safetensors
if [ ! -f "$comfy/models/checkpoints/$name" ]; then
  build/venv/bin/python tools/integration/make_checkpoint.py --out "$comfy/models/checkpoints/$name" $full
fi
size=128
[ "$device" = gpu ] && size=512
"$venv/bin/python" tools/integration/comfyui_run.py --comfyui "$comfy" --python "$PWD/$venv/bin/python" \
  --checkpoint "$name" --out "build/integration/comfyui-$device" --device "$device" --size "$size"
