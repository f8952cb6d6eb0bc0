#!/usr/bin/env python3
"""One SD1.5 UNet step (batch 2 as classifier-free guidance runs it, 64x64 latent, f16, random weights)
in diffusers and in hipDiffusion, in one run on one GPU, and the ratio.

diffusers: UNet2DConditionModel with SD1.5's configuration, eager (and with torch.compile when --compile
is given), CUDA events, median of 20 after 5 warm-up calls. hipDiffusion: build/cuda/hd_bench_unet_step,
the same shapes, plain (one launch per op) and replaying a captured graph, medians after the
warm-up calls (the first autotunes, the second graph call captures).

    python3 bench/compare_diffusers.py [--compile] [--bench build/cuda/hd_bench_unet_step]
"""
import argparse
import re
import subprocess

import torch


def median_ms(fn, iters=20, warm=5):
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record(); fn(); end.record(); torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return sorted(times)[len(times) // 2]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--compile", action="store_true", help="also time diffusers under torch.compile")
    parser.add_argument("--bench", default="build/cuda/hd_bench_unet_step")
    args = parser.parse_args()
    from diffusers import UNet2DConditionModel

    print("device:", torch.cuda.get_device_name(), "torch", torch.__version__)
    torch.manual_seed(0)
    unet = UNet2DConditionModel(cross_attention_dim=768, attention_head_dim=8, sample_size=64)  # SD1.5's config
    unet = unet.to("cuda", torch.float16).eval()
    sample = torch.randn(2, 4, 64, 64, device="cuda", dtype=torch.float16)
    context = torch.randn(2, 77, 768, device="cuda", dtype=torch.float16)
    t = torch.tensor(500, device="cuda")
    with torch.inference_mode():
        eager = median_ms(lambda: unet(sample, t, context).sample)
    results = {"diffusers eager": eager}
    if args.compile:
        compiled = torch.compile(unet)
        with torch.inference_mode():
            results["diffusers + torch.compile"] = median_ms(lambda: compiled(sample, t, context).sample)
    del unet
    torch.cuda.empty_cache()

    run = subprocess.run([args.bench, "12", "64", "cuda:0", "f16"], capture_output=True, text=True, check=True)
    print(run.stdout.strip())
    plain = float(re.search(r"one launch per op: median ([0-9.]+) ms", run.stdout).group(1))
    graph = float(re.search(r"captured graph: median ([0-9.]+) ms", run.stdout).group(1))
    print("\nSD1.5 UNet step, batch 2, 64x64 latent, f16     ms   graph / it   plain / it")
    for name, ms in results.items():
        print(f"{name:42s} {ms:8.2f}   {graph / ms:9.2f}   {plain / ms:9.2f}")
    print(f"{'hipDiffusion, captured graph':42s} {graph:8.2f}")
    print(f"{'hipDiffusion, one launch per op':42s} {plain:8.2f}")


if __name__ == "__main__":
    main()
