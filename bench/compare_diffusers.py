#!/usr/bin/env python3
"""hipDiffusion beside diffusers on one GPU in one run: the same architecture, resolution, batch, dtype
and random weights (speed does not depend on their values), and the ratios.

1. One UNet step, batch 2 as classifier-free guidance runs it, 64x64 latent, f16: diffusers eager (and
   with torch.compile when --compile is given), CUDA events, median of 20 after 5 warm-up calls, against
   build/cuda/hd_bench_unet_step (plain, and replaying a captured graph).
2. A whole 512x512 txt2img generation (--steps, 30; Euler; CFG 7.5) and its stages: diffusers' models
   driven as StableDiffusionPipeline drives them (prompt and negative prompt encoded by the CLIP text
   encoder, when transformers is installed; each step: scale_model_input, the UNet on the batch of two,
   the guidance combine, EulerDiscreteScheduler.step; the VAE decode of latents / 0.18215; the image
   clamped and copied to the host), against `hipdiffusion bench --arch ARCH --json`. Medians of 3 runs
   after a warm-up; each stage ends with a device synchronisation on both sides.
3. The VAE decode of a 1024x1024 image, whole and in tiles (diffusers' enable_tiling; our --vae-tiling,
   exact tiles that give the whole decode's picture, and --vae-tiling-blended, enable_tiling's algorithm):
   median time and the decode's own peak device memory (above what was allocated before it).
4. SDXL (unless --no-sdxl): a whole 1024x1024 image, 30 Euler steps, CFG 5, f16: diffusers'
   StableDiffusionXLPipeline with SDXL base's configs and random weights (both text encoders, the VAE
   upcast to f32 as its force_upcast says), eager and (with --compile) its UNet under torch.compile,
   against `hipdiffusion bench --arch sdxl --json`; stages and peak device memory.

hipDiffusion's side runs once per kernel choice of --kernels (default: all,own): "all" lets the autotuner
pick NVIDIA's libraries (cuDNN, cuBLASLt) where they win, "own" runs our kernels only, as an AMD GPU
without a winning vendor library does (issue 21's two columns). Each choice keeps a tuning cache of its
own ($HD_TUNE_CACHE.<choice>, else /tmp/hd-compare-tuning-<choice>.tsv). The "hipDiffusion" keys of the JSON
are the first choice's; the others add ", own kernels" (or ", <choice> kernels").

With --json-out PATH, every number above is also written there (tools/plot_stages.py draws the chart of
BENCHMARKS.md from it).

    python3 bench/compare_diffusers.py [--compile] [--arch sd15|sd21] [--steps N] [--build build/cuda]
                                       [--kernels all,own] [--no-sdxl | --sdxl-only] [--json-out PATH]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import time

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


def unet_config(arch):
    if arch == "sd15":
        return dict(cross_attention_dim=768, attention_head_dim=8, sample_size=64)
    return dict(cross_attention_dim=1024, attention_head_dim=[5, 10, 20, 20], use_linear_projection=True,
                sample_size=64)


def text_encoder(arch):
    """transformers' CLIPTextModel of the architecture, or None where transformers is not installed."""
    try:
        from transformers import CLIPTextConfig, CLIPTextModel
    except ImportError:
        return None
    if arch == "sd15":
        cfg = CLIPTextConfig(hidden_size=768, intermediate_size=3072, num_hidden_layers=12, num_attention_heads=12,
                             hidden_act="quick_gelu", max_position_embeddings=77, vocab_size=49408)
    else:
        cfg = CLIPTextConfig(hidden_size=1024, intermediate_size=4096, num_hidden_layers=23, num_attention_heads=16,
                             hidden_act="gelu", max_position_embeddings=77, vocab_size=49408)
    return CLIPTextModel(cfg).to("cuda", torch.float16).eval()


def kernel_env(kernels):
    """The environment of our side's processes for one kernel choice: HD_KERNELS and its tuning cache."""
    cache = os.environ.get("HD_TUNE_CACHE", f"/tmp/hd-compare-tuning-{kernels}.tsv")
    if "HD_TUNE_CACHE" in os.environ:
        cache = f"{cache}.{kernels}"
    return dict(os.environ, HD_KERNELS=kernels, HD_TUNE_CACHE=cache)


def our_name(kernels, first):
    """hipDiffusion's column for a kernel choice: the first choice keeps the plain name."""
    return "hipDiffusion" if first else f"hipDiffusion, {kernels} kernels"


def hipdiffusion_bench(build, kernels, *flags):
    """`hipdiffusion bench ... --json` on cuda:0 with one kernel choice: its report."""
    run = subprocess.run([f"{build}/hipdiffusion", "bench", "--device", "cuda:0", "--kernels", kernels, *flags, "--json"],
                         capture_output=True, text=True, env=kernel_env(kernels))
    if run.returncode != 0:
        raise SystemExit(f"hipdiffusion bench --kernels {kernels} {' '.join(flags)} failed:\n{run.stderr}")
    return json.loads(run.stdout)


def print_stages(stages, ours, peers, extra_rows=()):
    """Rows of stages: each of our kernel choices, each peer, then every (ours / peer) ratio."""
    ratios = [(o, p) for o in ours for p in peers]
    print(f"{'stage':32s}" + "".join(f" {n:>30s}" for n in [*ours, *peers]) +
          "".join(f" {'/'.join(short(x) for x in r):>13s}" for r in ratios))
    for label, peer_key, our_key in stages:
        mine = {o: j[our_key] for o, j in ours.items()}
        theirs = {p: t[peer_key] for p, t in peers.items()}
        line = f"{label:32s}" + "".join(f" {v:30.2f}" for v in [*mine.values(), *theirs.values()])
        for o, p in ratios:
            line += f" {mine[o] / theirs[p]:13.2f}" if theirs[p] == theirs[p] else f" {'n/a':>13s}"
        print(line)
    for row in extra_rows:
        print(row)


def short(name):
    """A column's short name in a ratio's header."""
    return {"hipDiffusion": "ours", "diffusers eager": "eager", "diffusers + torch.compile": "compile"}.get(
        name, name.replace("hipDiffusion, ", "").replace(" kernels", ""))


def timed(fn):
    torch.cuda.synchronize()
    start = time.perf_counter()
    out = fn()
    torch.cuda.synchronize()
    return out, 1e3 * (time.perf_counter() - start)


def diffusers_generation(unet, vae, encoder, scheduler, arch, steps):
    """One generation as StableDiffusionPipeline runs it; the stages' milliseconds."""
    width = 768 if arch == "sd15" else 1024
    ids = torch.randint(0, 49408, (1, 77), device="cuda")
    t = {}

    def encode():
        if encoder is None:  # without transformers: the embeddings a text encoder would return
            return torch.randn(2, 77, width, device="cuda", dtype=torch.float16)
        return torch.cat([encoder(ids)[0], encoder(ids)[0]])
    start = time.perf_counter()
    context, t["text"] = timed(encode)
    if encoder is None:
        t["text"] = float("nan")  # not measured: the whole image then lacks it too

    def loop():
        scheduler.set_timesteps(steps, device="cuda")
        latents = torch.randn(1, 4, 64, 64, device="cuda", dtype=torch.float16) * scheduler.init_noise_sigma
        step_times = []
        for ts in scheduler.timesteps:
            s0 = time.perf_counter()
            x = scheduler.scale_model_input(torch.cat([latents] * 2), ts)
            noise = unet(x, ts, encoder_hidden_states=context).sample
            uncond, cond = noise.chunk(2)
            latents = scheduler.step(uncond + 7.5 * (cond - uncond), ts, latents).prev_sample
            torch.cuda.synchronize()
            step_times.append(1e3 * (time.perf_counter() - s0))
        return latents, step_times
    (latents, step_times), t["loop"] = timed(loop)
    t["step"] = statistics.median(step_times)
    _, t["decode"] = timed(lambda: (vae.decode(latents / 0.18215).sample / 2 + 0.5).clamp(0, 1).float().cpu())
    t["image"] = 1e3 * (time.perf_counter() - start)
    return t


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--compile", action="store_true", help="also time diffusers' UNet under torch.compile")
    parser.add_argument("--arch", default="sd15", choices=["sd15", "sd21"], help="the whole-generation comparison")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--build", default="build/cuda")
    parser.add_argument("--no-sdxl", action="store_true", help="skip the SDXL whole-image comparison")
    parser.add_argument("--sdxl-only", action="store_true", help="only the SDXL whole-image comparison (4.)")
    parser.add_argument("--json-out", help="also write every number to this JSON file")
    parser.add_argument("--kernels", default="all,own",
                        help="hipDiffusion's kernel choices, comma-separated: all (with NVIDIA's libraries), own, "
                             "fragments (ours without Hopper's warpgroup kernels)")
    args = parser.parse_args()
    args.kernels = args.kernels.split(",")
    if not args.kernels or any(k not in ("all", "own", "fragments") for k in args.kernels) or len(set(args.kernels)) != len(args.kernels):
        parser.error(f"--kernels takes all, own and/or fragments, comma-separated, each once; got {','.join(args.kernels)}")
    report = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
              "date": time.strftime("%Y-%m-%d"), "arch": args.arch, "steps": args.steps, "kernels": args.kernels}
    if args.sdxl_only:
        from diffusers.utils import logging
        logging.set_verbosity_error()
        print("device:", torch.cuda.get_device_name(), "torch", torch.__version__)
        report["sdxl"] = sdxl_comparison(args.build, args.compile, args.kernels)
        del report["arch"], report["steps"]  # the SD1.x comparison's, not run here
        if args.json_out:
            with open(args.json_out, "w") as f:
                json.dump(report, f, indent=1)
        return
    from diffusers import AutoencoderKL, EulerDiscreteScheduler, UNet2DConditionModel
    from diffusers.utils import logging
    logging.set_verbosity_error()

    print("device:", torch.cuda.get_device_name(), "torch", torch.__version__)
    torch.manual_seed(0)
    # 1. One SD1.5 UNet step.
    unet = UNet2DConditionModel(**unet_config("sd15")).to("cuda", torch.float16).eval()
    sample = torch.randn(2, 4, 64, 64, device="cuda", dtype=torch.float16)
    context = torch.randn(2, 77, 768, device="cuda", dtype=torch.float16)
    t = torch.tensor(500, device="cuda")
    with torch.inference_mode():
        step = {"diffusers eager": median_ms(lambda: unet(sample, t, context).sample)}
        compiled = None
        if args.compile:
            compiled = torch.compile(unet)
            step["diffusers + torch.compile"] = median_ms(lambda: compiled(sample, t, context).sample)
    ours = {}
    for i, kernels in enumerate(args.kernels):
        run = subprocess.run([f"{args.build}/hd_bench_unet_step", "12", "64", "cuda:0", "f16"], capture_output=True,
                             text=True, check=True, env=kernel_env(kernels))
        print(f"--kernels {kernels}:\n{run.stdout.strip()}")
        name = our_name(kernels, i == 0)
        ours[f"{name} graph"] = float(re.search(r"captured graph: median ([0-9.]+) ms", run.stdout).group(1))
        ours[f"{name} plain"] = float(re.search(r"one launch per op: median ([0-9.]+) ms", run.stdout).group(1))
    print("\nSD1.5 UNet step, batch 2, 64x64 latent, f16     ms" + "".join(f"  {n} / it" for n in ours))
    for name, ms in step.items():
        print(f"{name:42s} {ms:8.2f}" + "".join(f"  {v / ms:{len(n) + 5}.2f}" for n, v in ours.items()))
    for n, v in ours.items():
        print(f"{n:42s} {v:8.2f}")
    report["sd15_unet_step_ms"] = dict(step, **ours)

    # 2. A whole generation and its stages.
    if args.arch != "sd15":
        del unet, compiled
        torch.cuda.empty_cache()
        unet = UNet2DConditionModel(**unet_config(args.arch)).to("cuda", torch.float16).eval()
        compiled = torch.compile(unet) if args.compile else None
    vae = AutoencoderKL(block_out_channels=[128, 256, 512, 512], down_block_types=["DownEncoderBlock2D"] * 4,
                        up_block_types=["UpDecoderBlock2D"] * 4, layers_per_block=2,
                        latent_channels=4).to("cuda", torch.float16).eval()
    encoder = text_encoder(args.arch)
    scheduler = EulerDiscreteScheduler(beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear",
                                       steps_offset=1, timestep_spacing="leading",
                                       prediction_type="epsilon" if args.arch == "sd15" else "v_prediction")
    peers = {}
    with torch.inference_mode():
        for name, model in [("diffusers eager", unet), ("diffusers + torch.compile", compiled)]:
            if model is None:
                continue
            diffusers_generation(model, vae, encoder, scheduler, args.arch, args.steps)  # warm-up
            runs = [diffusers_generation(model, vae, encoder, scheduler, args.arch, args.steps) for _ in range(3)]
            peers[name] = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    ours = {}
    for i, kernels in enumerate(args.kernels):
        ours[our_name(kernels, i == 0)] = hipdiffusion_bench(args.build, kernels, "--arch", args.arch, "--steps",
                                                             str(args.steps), "--repeats", "5")
        print(f"\nhipdiffusion bench --kernels {kernels}: {json.dumps(ours[our_name(kernels, i == 0)])}")
    print(f"text encoder in diffusers' run: {'transformers CLIPTextModel' if encoder else 'none (transformers absent)'}")
    print(f"\n{args.arch} 512x512, {args.steps} Euler steps, CFG 7.5, f16, ms (median)")
    stages = [("text encoding", "text", "text_encoding_ms"), ("UNet step (batch 2 + sampler)", "step", "unet_step_ms"),
              (f"denoising loop ({args.steps} steps)", "loop", "denoising_ms"), ("VAE decode", "decode", "vae_decode_ms"),
              ("whole image", "image", "image_ms")]
    print_stages(stages, ours, peers, [f"peak device memory, {n}: {j['peak_device_memory_bytes'] / 2**30:.2f} GiB"
                                       for n, j in ours.items()])
    report["generation_ms"] = {n: {label: j[key] for label, _, key in stages} for n, j in ours.items()}
    for name, timings in peers.items():
        report["generation_ms"][name] = {label: timings[key] for label, key, _ in stages}

    # 3. The VAE decode of a 1024x1024 image, whole and in tiles: time (decode, clamp, copy to the host)
    # and the decode's own peak memory (above what was allocated before it: the activations).
    del unet, compiled, encoder
    torch.cuda.empty_cache()
    z = torch.randn(1, 4, 128, 128, device="cuda", dtype=torch.float16)
    vae_rows = {}
    with torch.inference_mode():
        for name, tiling in [("diffusers, whole", False), ("diffusers, enable_tiling", True)]:
            vae.enable_tiling() if tiling else vae.disable_tiling()
            decode = lambda: (vae.decode(z).sample / 2 + 0.5).clamp(0, 1).float().cpu()
            decode()
            torch.cuda.synchronize()
            before = torch.cuda.memory_allocated()
            torch.cuda.reset_peak_memory_stats()
            times = [timed(decode)[1] for _ in range(5)]
            vae_rows[name] = (statistics.median(times), (torch.cuda.max_memory_allocated() - before) / 2**30)
    for i, kernels in enumerate(args.kernels):
        for what, flag in [("whole", []), ("--vae-tiling", ["--vae-tiling"]),
                           ("--vae-tiling-blended", ["--vae-tiling-blended"])]:
            j = hipdiffusion_bench(args.build, kernels, "--arch", "sd15", "--width", "1024", "--height", "1024",
                                   "--steps", "2", "--repeats", "5", *flag)
            vae_rows[f"{our_name(kernels, i == 0)}, {what}"] = (j["vae_decode_ms"],
                                                               j["vae_decode_extra_device_memory_bytes"] / 2**30)
    vae_weights = sum(p.numel() * p.element_size() for p in vae.decoder.parameters()) / 2**30
    print(f"\nVAE decode, 1024x1024, f16 (to the host, clamped); the decoder's weights: {vae_weights:.2f} GiB")
    print(f"{'':52s} {'ms':>8s} {'ratio to diffusers whole':>26s} {'own peak GiB':>13s}")
    base = vae_rows["diffusers, whole"][0]
    for name, (ms, gib) in vae_rows.items():
        print(f"{name:52s} {ms:8.2f} {ms / base:26.2f} {gib:13.2f}")
    report["vae_1024"] = {name: {"ms": ms, "own_peak_gib": gib} for name, (ms, gib) in vae_rows.items()}

    if not args.no_sdxl:
        del vae
        torch.cuda.empty_cache()
        report["sdxl"] = sdxl_comparison(args.build, args.compile, args.kernels)
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(report, f, indent=1)


def sdxl_pipeline(folder):
    """diffusers' StableDiffusionXLPipeline with SDXL base's configs (stabilityai/stable-diffusion-xl-base-1.0)
    and random weights, f16 on the GPU; the tokenizers from `folder`, the random model `hipdiffusion bench
    --arch sdxl` wrote (the built-in model's small vocabulary: text length and speed do not depend on it)."""
    from diffusers import EulerDiscreteScheduler, StableDiffusionXLPipeline
    from transformers import CLIPTokenizer

    # The random initialisation on the GPU (seconds, not minutes on the host). A `with` block around the
    # models only, not torch.set_default_device: that leaves a device mode intercepting every later torch
    # call, which slowed diffusers' eager UNet step by a further 15% in a first try.
    with torch.device("cuda"):
        models = sdxl_models()
    scheduler = EulerDiscreteScheduler(beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear",
                                       steps_offset=1, timestep_spacing="leading")
    pipe = StableDiffusionXLPipeline(
        **models, tokenizer=CLIPTokenizer.from_pretrained(f"{folder}/tokenizer"),
        tokenizer_2=CLIPTokenizer.from_pretrained(f"{folder}/tokenizer_2"), scheduler=scheduler, add_watermarker=False)
    pipe.set_progress_bar_config(disable=True)
    return pipe.to("cuda", torch.float16)


def sdxl_models():
    from diffusers import AutoencoderKL, UNet2DConditionModel
    from transformers import CLIPTextConfig, CLIPTextModel, CLIPTextModelWithProjection

    unet = UNet2DConditionModel(
        sample_size=128, block_out_channels=(320, 640, 1280), layers_per_block=2, cross_attention_dim=2048,
        down_block_types=("DownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D"),
        up_block_types=("CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "UpBlock2D"), attention_head_dim=(5, 10, 20),
        use_linear_projection=True, transformer_layers_per_block=(1, 2, 10), addition_embed_type="text_time",
        addition_time_embed_dim=256, projection_class_embeddings_input_dim=2816).half()
    vae = AutoencoderKL(block_out_channels=[128, 256, 512, 512], down_block_types=["DownEncoderBlock2D"] * 4,
                        up_block_types=["UpDecoderBlock2D"] * 4, layers_per_block=2, latent_channels=4,
                        sample_size=1024, scaling_factor=0.13025, force_upcast=True).half()
    common = dict(max_position_embeddings=77, vocab_size=49408)
    encoder = CLIPTextModel(CLIPTextConfig(hidden_size=768, intermediate_size=3072, num_hidden_layers=12,
                                           num_attention_heads=12, hidden_act="quick_gelu", **common)).half()
    encoder_2 = CLIPTextModelWithProjection(CLIPTextConfig(hidden_size=1280, intermediate_size=5120,
                                                           num_hidden_layers=32, num_attention_heads=20,
                                                           hidden_act="gelu", projection_dim=1280, **common)).half()
    # In eval mode, as from_pretrained leaves them (a module built directly is in training mode, where its
    # dropouts, p = 0, still run: diffusers' eager UNet step took 123 ms instead of 72).
    return {name: m.eval() for name, m in dict(unet=unet, vae=vae, text_encoder=encoder, text_encoder_2=encoder_2).items()}


def pipeline_generation(pipe, steps, cfg, size=1024):
    """One call of a diffusers pipeline (StableDiffusion[XL]Pipeline), size x size, to a host image: the
    whole time and the stages, read from the step callback (each step waited for): text encoding and set-up
    (up to the first step's start), the median step, the loop, and the decode with post-processing (after
    the last step)."""
    marks = []

    def on_step_end(_pipe, _i, _t, kwargs):
        torch.cuda.synchronize()
        marks.append(time.perf_counter())
        return kwargs
    torch.cuda.synchronize()
    start = time.perf_counter()
    pipe(prompt="a photograph of an astronaut riding a horse", negative_prompt="blurry", num_inference_steps=steps,
         guidance_scale=cfg, height=size, width=size, output_type="np", callback_on_step_end=on_step_end,
         generator=torch.Generator("cuda").manual_seed(0))
    torch.cuda.synchronize()
    end = time.perf_counter()
    step = statistics.median(b - a for a, b in zip(marks, marks[1:]))
    first_step_start = marks[0] - step
    return {"text": 1e3 * (first_step_start - start), "step": 1e3 * step, "loop": 1e3 * (marks[-1] - first_step_start),
            "decode": 1e3 * (end - marks[-1]), "image": 1e3 * (end - start)}


def sdxl_comparison(build, compile_too, kernel_choices, steps=30, cfg=5.0):
    """4. A whole SDXL 1024x1024 image: diffusers' StableDiffusionXLPipeline eager (and with its UNet under
    torch.compile) beside `hipdiffusion bench --arch sdxl` for each kernel choice, stages and peak device
    memory."""
    import tempfile

    ours = {}
    for i, kernels in enumerate(kernel_choices):
        ours[our_name(kernels, i == 0)] = hipdiffusion_bench(build, kernels, "--arch", "sdxl", "--steps", str(steps),
                                                             "--cfg-scale", str(cfg), "--repeats", "3")
        print(f"\nhipdiffusion bench --arch sdxl --kernels {kernels}: {json.dumps(ours[our_name(kernels, i == 0)])}")
    mine = ours["hipDiffusion"]
    pipe = sdxl_pipeline(f"{tempfile.gettempdir()}/hipdiffusion-random-sdxl")
    peers = {}
    with torch.inference_mode():
        # The UNet alone as the pipeline calls it, CUDA events: a check on the step read from the callbacks.
        sample = torch.randn(2, 4, 128, 128, device="cuda", dtype=torch.float16)
        context = torch.randn(2, 77, 2048, device="cuda", dtype=torch.float16)
        added = {"text_embeds": torch.randn(2, 1280, device="cuda", dtype=torch.float16),
                 "time_ids": torch.tensor([[1024.0, 1024, 0, 0, 1024, 1024]] * 2, device="cuda", dtype=torch.float16)}
        timestep = torch.tensor(500, device="cuda")
        forward = lambda: pipe.unet(sample, timestep, context, added_cond_kwargs=added).sample
        unet_alone = median_ms(forward)
        # The same kernels replayed from a captured graph: their GPU time without Python's launching.
        # Where the eager step is far above it, diffusers is bound by the host's launch rate.
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            forward(), forward()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            forward()
        unet_kernels = median_ms(graph.replay)
        del graph
        print(f"diffusers' UNet alone, batch 2, CUDA events: eager {unet_alone:.2f} ms; its kernels replayed from a "
              f"captured graph {unet_kernels:.2f} ms")
        for name in ["diffusers eager"] + (["diffusers + torch.compile"] if compile_too else []):
            if name != "diffusers eager":
                pipe.unet = torch.compile(pipe.unet)
            pipeline_generation(pipe, steps, cfg)  # warm-up (and compilation)
            torch.cuda.reset_peak_memory_stats()
            runs = [pipeline_generation(pipe, steps, cfg) for _ in range(3)]
            peers[name] = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
            peers[name]["peak_gib"] = torch.cuda.max_memory_allocated() / 2**30
    print(f"\nSDXL 1024x1024, {steps} Euler steps, CFG {cfg}, f16, ms (median of 3); diffusers decodes in f32 "
          "(the VAE's force_upcast), hipDiffusion in bf16 (the same force_upcast: its GPU kernels run f16 or bf16)")
    stages = [("text encoding (+ set-up)", "text", "text_encoding_ms"),
              ("UNet step (batch 2 + sampler)", "step", "unet_step_ms"),
              (f"denoising loop ({steps} steps)", "loop", "denoising_ms"), ("VAE decode (+ to host)", "decode", "vae_decode_ms"),
              ("whole image", "image", "image_ms")]
    for j in ours.values():
        j["peak_gib"] = j["peak_device_memory_bytes"] / 2**30
    print_stages(stages + [("peak device memory, GiB", "peak_gib", "peak_gib")], ours, peers)
    del pipe
    torch.cuda.empty_cache()
    report = {n: dict({label: j[key] for label, _, key in stages}, peak_gib=j["peak_gib"]) for n, j in ours.items()}
    report.update({"hipdiffusion": mine, "diffusers_unet_alone_ms": unet_alone, "diffusers_unet_kernels_ms": unet_kernels})
    for name, t in peers.items():
        report[name] = dict({label: t[key] for label, key, _ in stages}, peak_gib=t["peak_gib"])
    return report


if __name__ == "__main__":
    main()
