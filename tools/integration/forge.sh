#!/usr/bin/env bash
# Stable Diffusion WebUI Forge ("Forge2", the backend/ one), run for real with and without hipDiffusion's
# extension: a virtual environment with Forge's pinned requirements beside the PyTorch and hipdiffusion of
# build/venv (made by tools/python/test.sh; pip_beside_torch.py keeps pip from installing a second
# PyTorch), the two repositories Forge clones at its start (huggingface_guess, which its backend imports to
# recognise a checkpoint, and BLIP; Forge's own pinned commits; the URLs can be overridden with Forge's own
# variables HUGGINGFACE_GUESS_REPO and BLIP_REPO, e.g. a local mirror), a random full-size SD1.x checkpoint
# (make_checkpoint.py --full), then tools/integration/forge_run.py.
# Nothing of Forge is kept in this repository: pass a checkout (dfdcbab6, June 2025, is what this was run
# with). Forge reads the text encoder's and tokenizer's configurations from its own backend/huggingface/,
# so no Hugging Face cache is needed offline.
# The hipdiffusion package is the one Forge's Python imports: build/venv's, or a checkout's python/ through
# PYTHONPATH, e.g. PYTHONPATH=$PWD/python tools/integration/forge.sh build/forge cpu.
#   usage: tools/integration/forge.sh FORGE_DIR [cpu|gpu]
set -euo pipefail
cd "$(dirname "$0")/../.."
forge=$(realpath "${1:?usage: tools/integration/forge.sh FORGE_DIR [cpu|gpu]}")
device=${2:-cpu}
[ -f "$forge/launch.py" ] && [ -d "$forge/backend" ] && [ -d "$forge/modules_forge" ] || { echo "$forge is not a Forge (Forge2) checkout" >&2; exit 1; }
[ -x build/venv/bin/python ] || { echo "build/venv is missing: run tools/python/test.sh first" >&2; exit 1; }

clone() {  # url folder commit: what Forge's prepare_environment does, without its pip installs
  # Checked out without its pictures: a mirror may lack their blobs (BLIP's BLIP.gif), and none is read.
  local repo=$forge/repositories/$2
  [ -d "$repo/.git" ] || git clone -q --no-checkout "$1" "$repo"
  if [ "$(git -C "$repo" rev-parse HEAD)" != "$3" ] || [ -z "$(git -C "$repo" ls-files)" ]; then
    git -C "$repo" reset -q --soft "$3"
    git -C "$repo" checkout -q HEAD -- . ':(exclude)*.gif' ':(exclude)*.png' ':(exclude)*.jpg'
  fi
}
mkdir -p "$forge/repositories"
clone "${HUGGINGFACE_GUESS_REPO:-https://github.com/lllyasviel/huggingface_guess.git}" huggingface_guess 84826248b49bb7ca754c73293299c4d4e23a548d
clone "${BLIP_REPO:-https://github.com/salesforce/BLIP.git}" BLIP 48211a1594f1321b00f14c9f7a5b4813144b2fb9

venv=build/venv-forge
bash tools/integration/venv_beside_torch.sh "$venv"
# Forge's pins, torchvision (Forge installs it with PyTorch; spandrel and Forge's modules import it) and
# openai-clip (PyPI's copy of the CLIP that Forge installs from GitHub).
"$venv/bin/python" tools/integration/pip_beside_torch.py "$venv/bin/python" "$forge/requirements_versions.txt" \
  torchvision==0.29.2 openai-clip==1.0.1

checkpoint=build/integration/hd-random-sd15-full.safetensors
[ -f "$checkpoint" ] || build/venv/bin/python tools/integration/make_checkpoint.py --full --out "$checkpoint"
size=128
[ "$device" = gpu ] && size=512
"$venv/bin/python" tools/integration/forge_run.py --forge "$forge" --python "$PWD/$venv/bin/python" \
  --extension integrations/a1111 --checkpoint "$checkpoint" --out "build/integration/forge-$device" \
  --device "$device" --size "$size"
