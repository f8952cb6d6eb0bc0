#!/usr/bin/env python3
"""Writes an SD1.x diffusers folder (the random one `hipdiffusion bench --arch sd15` writes) as one
single-file checkpoint in the original LDM names, f16: the form stable-diffusion.cpp and most users'
downloads take, so that tools/device/first_image.sh times both programs on the same file.

The names come from tools/make_fixtures.py's to_ldm_single_file, the inverse of diffusers' conversion,
which the fixtures check against diffusers' own from_single_file. The random folder's VAE is a decoder
only; a real checkpoint also holds the encoder (and stable-diffusion.cpp refuses a file without it), so
SD's VAE encoder is added with random weights in its LDM names. Needs torch and safetensors.

usage: ldm_single_file.py FOLDER OUT.safetensors
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import torch  # noqa: E402
from safetensors.torch import save_file  # noqa: E402

from make_fixtures import to_ldm_single_file  # noqa: E402

folder, out = Path(sys.argv[1]), Path(sys.argv[2])


def vae_encoder(g: torch.Generator) -> dict:
    """SD's VAE encoder (channels 128, 256, 512, 512; two resnets a level; 4 latent channels, doubled for
    mean and log-variance) and quant_conv, random, in LDM names."""
    shapes = {}

    def conv(name, cout, cin, k):
        shapes[name + ".weight"], shapes[name + ".bias"] = [cout, cin, k, k], [cout]

    def norm(name, c):
        shapes[name + ".weight"], shapes[name + ".bias"] = [c], [c]

    def resnet(name, cin, cout):
        norm(name + ".norm1", cin)
        conv(name + ".conv1", cout, cin, 3)
        norm(name + ".norm2", cout)
        conv(name + ".conv2", cout, cout, 3)
        if cin != cout:
            conv(name + ".nin_shortcut", cout, cin, 1)

    e = "first_stage_model.encoder."
    channels = [128, 256, 512, 512]
    conv(e + "conv_in", 128, 3, 3)
    cin = 128
    for level, c in enumerate(channels):
        for j in range(2):
            resnet(f"{e}down.{level}.block.{j}", cin, c)
            cin = c
        if level < len(channels) - 1:
            conv(f"{e}down.{level}.downsample.conv", c, c, 3)
    resnet(e + "mid.block_1", 512, 512)
    norm(e + "mid.attn_1.norm", 512)
    for head in ("q", "k", "v", "proj_out"):
        conv(f"{e}mid.attn_1.{head}", 512, 512, 1)
    resnet(e + "mid.block_2", 512, 512)
    norm(e + "norm_out", 512)
    conv(e + "conv_out", 8, 512, 3)
    conv("first_stage_model.quant_conv", 8, 8, 1)
    return {k: torch.randn(s, generator=g) * 0.02 for k, s in shapes.items()}


state = to_ldm_single_file(folder, "sd1")
state.update(vae_encoder(torch.Generator().manual_seed(5)))
state = {k: v.to(torch.float16).contiguous() for k, v in state.items()}
save_file(state, str(out))
print(f"{out}: {len(state)} tensors, {sum(v.numel() for v in state.values()) / 1e9:.3f} G parameters, f16")
