#!/usr/bin/env python3
"""Writes an SD1.x diffusers folder (the random one `hipdiffusion bench --arch sd15` writes) as one
single-file checkpoint in the original LDM names, f16: the form stable-diffusion.cpp and most users'
downloads take, so that tools/device/first_image.sh times both programs on the same file.

The names come from tools/make_fixtures.py's to_ldm_single_file, the inverse of diffusers' conversion,
which the fixtures check against diffusers' own from_single_file. Needs torch and safetensors.

usage: ldm_single_file.py FOLDER OUT.safetensors
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import torch  # noqa: E402
from safetensors.torch import save_file  # noqa: E402

from make_fixtures import to_ldm_single_file  # noqa: E402

folder, out = Path(sys.argv[1]), Path(sys.argv[2])
state = {k: v.to(torch.float16) for k, v in to_ldm_single_file(folder, "sd1").items()}
save_file(state, str(out))
print(f"{out}: {len(state)} tensors, {sum(v.numel() for v in state.values()) / 1e9:.3f} G parameters, f16")
