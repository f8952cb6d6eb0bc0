#!/usr/bin/env bash
# A virtual environment for a UI run that sees build/venv's packages (PyTorch, hipdiffusion, diffusers)
# behind its own, through a .pth file: the UI's pins go into it, PyTorch is not installed twice.
#   usage: tools/integration/venv_beside_torch.sh VENV   (from the repository root; kept if it exists)
set -euo pipefail
venv=${1:?usage: tools/integration/venv_beside_torch.sh VENV}
[ -x "$venv/bin/python" ] && exit 0
python3 -m venv "$venv"
base=$(build/venv/bin/python -c "import site; print(site.getsitepackages()[0])")
site=$("$venv/bin/python" -c "import site; print(site.getsitepackages()[0])")
echo "$base" > "$site/hipdiffusion-base-venv.pth"
