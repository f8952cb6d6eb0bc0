#!/usr/bin/env python3
"""Whole images through diffusers' own pipeline, five ways, in one run on one GPU: diffusers eager,
diffusers + hipdiffusion.diffusers.optimize (our attention, GroupNorm and GEGLU in diffusers' modules),
diffusers + optimize(mode="engine") (the whole UNet and VAE through the engine on the pipeline's weights),
diffusers with its UNet under torch.compile (--compile), and the engine's own CLI (`hipdiffusion bench`,
in-process, the same architecture, steps and guidance).

SD1.5 at 512x512 (CFG 7.5) or SDXL base at 1024x1024 (CFG 5), 30 Euler steps, f16, random weights (speed
does not depend on their values), models built as bench/compare_diffusers.py builds them. Per way: one
warm-up image (it tunes, captures and compiles), then the median of 3 whole images (the pipeline call to
a host image, nothing waited for in between) and one more image with a synchronising step callback for
the stages (text and set-up, the median step, the decode). "torch peak" is PyTorch's caching allocator's
peak: the engine's own memory (its weights' bfloat16 copy for an upcast VAE, the UNet graphs'
activations) is not in it, so for engine mode it is not the process's peak; the CLI's is its own.

    PYTHONPATH=python python3 bench/diffusers_pipeline_bench.py [--arch sd15|sdxl] [--compile]
                                                               [--build build/cuda] [--json-out FILE]
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_diffusers import hipdiffusion_bench, pipeline_generation, sdxl_pipeline, text_encoder, unet_config  # noqa: E402

import hipdiffusion  # noqa: E402
import hipdiffusion.diffusers  # noqa: E402


def sd15_pipeline(folder):
    """diffusers' StableDiffusionPipeline with SD1.5's configs and random weights, f16 on the GPU; the
    tokenizer from `folder` (the random model `hipdiffusion bench --arch sd15` wrote)."""
    from diffusers import AutoencoderKL, EulerDiscreteScheduler, StableDiffusionPipeline, UNet2DConditionModel
    from transformers import CLIPTokenizer

    with torch.device("cuda"):
        unet = UNet2DConditionModel(**unet_config("sd15")).half().eval()
        vae = AutoencoderKL(block_out_channels=[128, 256, 512, 512], down_block_types=["DownEncoderBlock2D"] * 4,
                            up_block_types=["UpDecoderBlock2D"] * 4, layers_per_block=2, latent_channels=4,
                            sample_size=512).half().eval()
    scheduler = EulerDiscreteScheduler(beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear",
                                       steps_offset=1, timestep_spacing="leading")
    pipe = StableDiffusionPipeline(vae=vae, text_encoder=text_encoder("sd15"), unet=unet, scheduler=scheduler,
                                   tokenizer=CLIPTokenizer.from_pretrained(f"{folder}/tokenizer"),
                                   safety_checker=None, feature_extractor=None, requires_safety_checker=False)
    pipe.set_progress_bar_config(disable=True)
    return pipe.to("cuda", torch.float16)


def whole_image_ms(pipe, steps, cfg, size):
    """One pipeline call to a host image, nothing waited for inside it."""
    torch.cuda.synchronize()
    start = time.perf_counter()
    pipe(prompt="a photograph of an astronaut riding a horse", negative_prompt="blurry", num_inference_steps=steps,
         guidance_scale=cfg, height=size, width=size, output_type="np", generator=torch.Generator("cuda").manual_seed(0))
    torch.cuda.synchronize()
    return 1e3 * (time.perf_counter() - start)


def measure(pipe, steps, cfg, size):
    pipeline_generation(pipe, steps, cfg, size)  # warm-up: tuning, graph capture, compilation
    torch.cuda.reset_peak_memory_stats()
    images = [whole_image_ms(pipe, steps, cfg, size) for _ in range(3)]
    stages = pipeline_generation(pipe, steps, cfg, size)
    return {"image_ms": statistics.median(images), "images_ms": images, "text_ms": stages["text"],
            "step_ms": stages["step"], "decode_ms": stages["decode"],
            "peak_gib": torch.cuda.max_memory_allocated() / 2**30}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", choices=["sd15", "sdxl"], default="sd15")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--compile", action="store_true")
    parser.add_argument("--build", default="build/cuda")
    parser.add_argument("--json-out")
    args = parser.parse_args()
    from diffusers.utils import logging
    logging.set_verbosity_error()

    size, cfg = (512, 7.5) if args.arch == "sd15" else (1024, 5.0)
    cli = hipdiffusion_bench(args.build, "--arch", args.arch, "--steps", str(args.steps), "--cfg-scale", str(cfg),
                             "--repeats", "3")
    folder = f"{tempfile.gettempdir()}/hipdiffusion-random-{args.arch}"
    torch.manual_seed(0)
    pipe = sd15_pipeline(folder) if args.arch == "sd15" else sdxl_pipeline(folder)
    results = {}
    with torch.inference_mode():
        results["diffusers eager"] = measure(pipe, args.steps, cfg, size)
        hipdiffusion.diffusers.optimize(pipe)
        results["diffusers + optimize"] = measure(pipe, args.steps, cfg, size)
        hipdiffusion.diffusers.optimize(pipe, mode="engine")
        results["diffusers + optimize(mode='engine')"] = measure(pipe, args.steps, cfg, size)
        hipdiffusion.diffusers.restore(pipe)
        if args.compile:
            pipe.unet = torch.compile(pipe.unet)
            results["diffusers + torch.compile"] = measure(pipe, args.steps, cfg, size)
    fallbacks = hipdiffusion.fallback_report()
    cli_ms = cli["image_ms"]
    compiled = results.get("diffusers + torch.compile", {}).get("image_ms")
    print(f"\n{args.arch} {size}x{size}, {args.steps} Euler steps, CFG {cfg}, f16, whole image to host, ms "
          f"(median of 3; {torch.cuda.get_device_name()})")
    print(f"{'way':40s} {'image':>9s} {'step':>7s} {'decode':>7s} {'text':>7s} {'vs CLI':>7s} {'vs compile':>10s} "
          f"{'torch peak GiB':>14s}")
    for name, r in results.items():
        vs_compile = f"{r['image_ms'] / compiled:10.2f}" if compiled else f"{'':10s}"
        print(f"{name:40s} {r['image_ms']:9.1f} {r['step_ms']:7.2f} {r['decode_ms']:7.1f} {r['text_ms']:7.1f} "
              f"{r['image_ms'] / cli_ms:7.2f} {vs_compile} {r['peak_gib']:14.2f}")
    vs_compile = f"{cli_ms / compiled:10.2f}" if compiled else f"{'':10s}"
    print(f"{'hipdiffusion bench (the CLI, in-process)':40s} {cli_ms:9.1f} {cli['unet_step_ms']:7.2f} "
          f"{cli['vae_decode_ms']:7.1f} {cli['text_encoding_ms']:7.1f} {1.0:7.2f} {vs_compile} "
          f"{cli['peak_device_memory_bytes'] / 2**30:14.2f}")
    print(f"fallbacks: {fallbacks}")
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump({"arch": args.arch, "size": size, "steps": args.steps, "cfg": cfg,
                       "device": torch.cuda.get_device_name(), "torch": torch.__version__, "ways": results,
                       "hipdiffusion_bench": cli, "fallbacks": fallbacks}, f, indent=1)


if __name__ == "__main__":
    main()
