#!/usr/bin/env python3
"""Records what diffusers draws with the default model, for hipDiffusion's second end-to-end check:
loads the saved folder with StableDiffusionPipeline.from_pretrained (so the folder is known to load in
diffusers) and runs it on the CPU in f32 from a CPU generator, as hipDiffusion's CPU path does.

    python3 tools/train_tiny/reference.py --model models/shapes-tiny \
        --out tests/fixtures/models/shapes_tiny_diffusers.safetensors
"""
import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from make_fixtures import make_scheduler, save  # noqa: E402

# (prompt, negative prompt, sampler, schedule, steps, cfg, seed): the first is the README's command with
# every default; the second changes every setting.
RUNS = [
    ("a green triangle on a white background", "", "euler", "discrete", 20, 7.5, 0),
    ("a purple star on a yellow background, bottom right", "black", "dpmpp_2m", "karras", 12, 5.0, 77),
]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args()
    from diffusers import StableDiffusionPipeline

    pipe = StableDiffusionPipeline.from_pretrained(str(args.model), torch_dtype=torch.float32)
    pipe.set_progress_bar_config(disable=True)
    default_scheduler = pipe.scheduler
    tensors, meta = {}, []
    for i, (prompt, negative, sampler, schedule, steps, cfg, seed) in enumerate(RUNS):
        pipe.scheduler = default_scheduler if sampler == "euler" else make_scheduler(
            sampler, schedule, default_scheduler.config.timestep_spacing, "epsilon")
        with torch.no_grad():
            latents = pipe(prompt=prompt, negative_prompt=negative or None, num_inference_steps=steps,
                           guidance_scale=cfg, generator=torch.Generator("cpu").manual_seed(seed),
                           output_type="latent").images
            image = (pipe.vae.decode(latents / pipe.vae.config.scaling_factor).sample / 2 + 0.5).clamp(0, 1)
        tensors[f"run{i}.latents"] = latents
        tensors[f"run{i}.image"] = image
        meta.append({"name": f"run{i}", "prompt": prompt, "negative_prompt": negative, "sampler": sampler,
                     "schedule": schedule, "steps": steps, "cfg": cfg, "seed": seed,
                     "width": image.shape[3], "height": image.shape[2]})
    save(tensors, meta, args.out)


if __name__ == "__main__":
    main()
