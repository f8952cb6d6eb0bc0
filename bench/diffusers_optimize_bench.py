#!/usr/bin/env python3
"""hipdiffusion.diffusers.optimize beside diffusers itself, in one run on one GPU: the UNet step (batch 2
as classifier-free guidance runs it, 77-token context) and the VAE decoding one image, f16, random
weights (speed does not depend on their values): SD1.5 at 512x512 (64x64 latent), or with --arch sdxl
SDXL base's UNet at 1024x1024 (128x128 latent, text-time conditioning) and its VAE at 1024x1024 (in f16
on both sides, not upcast as SDXL's force_upcast would: the same work timed twice). Columns: diffusers eager as
it comes (NCHW), diffusers eager with the models in channels_last memory (what optimize switches to, so
that the layout's own effect is seen apart), and diffusers + optimize (our attention, GroupNorm and GEGLU
in diffusers' modules); --compile adds each under torch.compile. CUDA events, median of 20 calls after 5
warm-up calls (which also fill the autotuner's choices).

    PYTHONPATH=python python3 bench/diffusers_optimize_bench.py [--arch sd15|sdxl] [--compile] [--json-out FILE]
"""
import argparse
import json
import os
import sys
import types

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_diffusers import median_ms, sdxl_models, unet_config  # noqa: E402

import hipdiffusion  # noqa: E402
import hipdiffusion.diffusers  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", choices=["sd15", "sdxl"], default="sd15")
    parser.add_argument("--compile", action="store_true")
    parser.add_argument("--json-out")
    args = parser.parse_args()
    from diffusers import AutoencoderKL, UNet2DConditionModel
    from diffusers.utils import logging
    logging.set_verbosity_error()

    torch.manual_seed(0)
    cuda = dict(device="cuda", dtype=torch.float16)
    if args.arch == "sd15":
        unet = UNet2DConditionModel(**unet_config("sd15")).to(**cuda).eval()
        vae = AutoencoderKL(block_out_channels=[128, 256, 512, 512], down_block_types=["DownEncoderBlock2D"] * 4,
                            up_block_types=["UpDecoderBlock2D"] * 4, layers_per_block=2,
                            latent_channels=4).to(**cuda).eval()
        size, width, extra = 64, 768, {}
    else:
        models = sdxl_models()
        unet, vae = models["unet"].to(**cuda), models["vae"].to(**cuda)
        size, width = 128, 2048
        extra = dict(added_cond_kwargs={"text_embeds": torch.randn(2, 1280, **cuda),
                                        "time_ids": torch.tensor([[1024, 1024, 0, 0, 1024, 1024]] * 2, **cuda)})
    sample = torch.randn(2, 4, size, size, **cuda)
    context = torch.randn(2, 77, width, **cuda)
    t = torch.tensor(500, device="cuda")
    latent = torch.randn(1, 4, size, size, **cuda)
    pipe = types.SimpleNamespace(unet=unet, vae=vae)

    def step():
        return unet(sample, t, context, **extra).sample

    def decode():
        return vae.decode(latent).sample

    rows = {}

    def measure(label):
        with torch.no_grad():  # as diffusers' pipelines call their models
            rows[label] = {"unet_step_ms": median_ms(step), "vae_decode_ms": median_ms(decode)}
            if args.compile:
                torch._dynamo.reset()
                compiled_unet, compiled_vae = torch.compile(unet), torch.compile(vae.decode)
                rows[label + " + torch.compile"] = {
                    "unet_step_ms": median_ms(lambda: compiled_unet(sample, t, context, **extra).sample),
                    "vae_decode_ms": median_ms(lambda: compiled_vae(latent).sample)}
        print(label, rows[label], flush=True)

    print("device:", torch.cuda.get_device_name(), "torch", torch.__version__)
    measure("diffusers eager (NCHW)")
    unet.to(memory_format=torch.channels_last)
    vae.to(memory_format=torch.channels_last)
    measure("diffusers eager (channels_last)")
    hipdiffusion.diffusers.optimize(pipe)
    measure("diffusers + optimize")
    hipdiffusion.diffusers.restore(pipe)

    base = rows["diffusers eager (NCHW)"]
    print(f"\n| {args.arch}, f16 | UNet step ms | vs eager | VAE decode {size * 8} ms | vs eager |")
    print("| --- | --- | --- | --- | --- |")
    for label, r in rows.items():
        print(f"| {label} | {r['unet_step_ms']:.2f} | {r['unet_step_ms'] / base['unet_step_ms']:.2f}x | "
              f"{r['vae_decode_ms']:.2f} | {r['vae_decode_ms'] / base['vae_decode_ms']:.2f}x |")
    report = hipdiffusion.fallback_report()
    print("fallbacks:", report or "none")
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "arch": args.arch,
                       "rows": rows, "fallbacks": report}, f, indent=1)


if __name__ == "__main__":
    main()
