#!/usr/bin/env python3
"""Trains hipDiffusion's default model: a small Stable Diffusion 1.x-family model (CLIP text encoder,
UNet with cross-attention, KL VAE) that draws one plain shape in one colour on a background of another,
as the shapes module describes. Runs on a CUDA machine with PyTorch, diffusers and transformers:

    python3 tools/train_tiny/train.py --out models/shapes-tiny

Deterministic given --seed and the step counts (the recorded run's are in the model's training.json).
Writes the model in the diffusers layout (f16 safetensors), its small CLIP BPE vocabulary, and
training.json: settings, losses, the held-out combinations, the prompts the C++ test draws, and the
accuracy diffusers' own pipeline reaches with these weights.
"""
import argparse
import copy
import json
import math
import os
import random
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
import shapes  # noqa: E402
import vocabulary  # noqa: E402

# Stable Diffusion 1.x's noise schedule.
SD_CONFIG = dict(num_train_timesteps=1000, beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear",
                 steps_offset=1)
# What `hipdiffusion generate` does by default (euler, 20 steps, CFG 7.5), so that the accuracy below is
# the accuracy of the README's command.
GENERATE_DEFAULTS = dict(num_inference_steps=20, guidance_scale=7.5)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, required=True, help="model folder to write (diffusers layout)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--vae-steps", type=int, default=1000)
    p.add_argument("--vae-batch", type=int, default=256)
    p.add_argument("--unet-steps", default="1800",
                   help="a number, or 'auto': as many (a multiple of 100) as fit before --deadline-s")
    p.add_argument("--deadline-s", type=float, default=float("inf"),
                   help="seconds from the start after which UNet training stops, whatever the step count (a "
                        "run that stops there records the steps it made)")
    p.add_argument("--batch", type=int, default=1024)
    p.add_argument("--lr", type=float, default=5e-4)
    p.add_argument("--caption-dropout", type=float, default=0.1, help="share of empty captions (for CFG)")
    p.add_argument("--eval-prompts", type=int, default=160, help="extra prompts to measure accuracy on")
    p.add_argument("--clip-merges", type=Path, default=Path("tests/fixtures/tokenizer/clip/merges.txt"))
    p.add_argument("--device", default="cuda")
    return p.parse_args()


def lr_factor(step: int, total: int, warmup: int) -> float:
    if step < warmup:
        return (step + 1) / warmup
    return 0.5 * (1 + math.cos(math.pi * min(1.0, (step - warmup) / max(1, total - warmup))))


class Batches:
    """Random training pictures and caption indices, drawn on the GPU from one seeded generator."""

    def __init__(self, triples: list, device: str, seed: int):
        index = {n: i for i, n in enumerate(shapes.COLOUR_NAMES)}
        shape_index = {n: i for i, n in enumerate(shapes.SHAPES)}
        self.triples = torch.tensor([[index[f], index[b], shape_index[s]] for f, b, s in triples], device=device)
        self.device = device
        self.gen = torch.Generator(device=device).manual_seed(seed)
        self.empty_caption = len(shapes.all_captions())  # the empty prompt's row, after every caption

    def rand(self, *shape):
        return torch.rand(shape, generator=self.gen, device=self.device)

    def draw(self, n: int, caption_dropout: float = 0.0):
        pick = torch.randint(len(self.triples), (n,), generator=self.gen, device=self.device)
        fg, bg, shape = self.triples[pick].unbind(1)
        # A fifth centred (the caption without a position phrase), the rest spread over the eight places.
        other = torch.randint(1, len(shapes.POSITIONS), (n,), generator=self.gen, device=self.device)
        position = torch.where(self.rand(n) < 0.2, torch.zeros_like(other), other)
        cx, cy = shapes.position_centre(position, (self.rand(n) * 2 - 1) * 3, (self.rand(n) * 2 - 1) * 3)
        radius = 9 + 3 * self.rand(n)
        images = shapes.render(fg, bg, shape, cx, cy, radius, supersample=2)
        captions = shapes.caption_index(fg, bg, shape, position)
        captions = torch.where(self.rand(n) < caption_dropout, torch.full_like(captions, self.empty_caption), captions)
        return images, captions


def make_vae():
    from diffusers import AutoencoderKL

    # Three levels: 64x64 pictures -> 16x16x4 latents.
    return AutoencoderKL(in_channels=3, out_channels=3, down_block_types=("DownEncoderBlock2D",) * 3,
                         up_block_types=("UpDecoderBlock2D",) * 3, block_out_channels=(32, 64, 64),
                         layers_per_block=1, latent_channels=4, norm_num_groups=32, sample_size=shapes.SIZE)


def make_text_encoder(vocab: dict):
    from transformers import CLIPTextConfig, CLIPTextModel

    return CLIPTextModel(CLIPTextConfig(
        vocab_size=len(vocab), hidden_size=128, intermediate_size=512, num_hidden_layers=3, num_attention_heads=4,
        max_position_embeddings=77, hidden_act="quick_gelu", layer_norm_eps=1e-5,
        bos_token_id=vocab["<|startoftext|>"], eos_token_id=vocab["<|endoftext|>"],
        pad_token_id=vocab["<|endoftext|>"]))


def make_unet():
    from diffusers import UNet2DConditionModel

    return UNet2DConditionModel(
        sample_size=shapes.SIZE // 4, in_channels=4, out_channels=4, layers_per_block=2,
        block_out_channels=(64, 96, 96),
        down_block_types=("CrossAttnDownBlock2D", "CrossAttnDownBlock2D", "DownBlock2D"),
        up_block_types=("UpBlock2D", "CrossAttnUpBlock2D", "CrossAttnUpBlock2D"),
        cross_attention_dim=128, attention_head_dim=4, norm_num_groups=32)


def train_vae(args, batches: Batches, log: dict):
    vae = make_vae().to(args.device).train()
    opt = torch.optim.AdamW(vae.parameters(), lr=1e-3, weight_decay=0.0)
    start, losses = time.time(), []
    for step in range(args.vae_steps):
        for group in opt.param_groups:
            group["lr"] = 1e-3 * lr_factor(step, args.vae_steps, 200)
        images, _ = batches.draw(args.vae_batch)
        posterior = vae.encode(images).latent_dist
        recon = vae.decode(posterior.sample(generator=batches.gen)).sample
        mse = F.mse_loss(recon, images)
        loss = mse + 1e-6 * posterior.kl().mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step % 500 == 0 or step == args.vae_steps - 1:
            losses.append((step, float(mse)))
            print(f"vae step {step}: mse {float(mse):.5f} ({time.time() - start:.0f} s)", flush=True)
    vae.eval().requires_grad_(False)
    with torch.no_grad():
        images, _ = batches.draw(1024)
        latents = vae.encode(images).latent_dist.sample(generator=batches.gen)
        scaling = float(1.0 / latents.std())
        recon = vae.decode(vae.encode(images).latent_dist.mode()).sample
    vae.register_to_config(scaling_factor=scaling)
    log["vae"] = {"steps": args.vae_steps, "batch": args.vae_batch, "mse": losses, "scaling_factor": scaling,
                  "held_out_recon_mse": float(F.mse_loss(recon, images)), "seconds": round(time.time() - start, 1)}
    print(f"vae: scaling factor {scaling:.4f}, reconstruction mse {log['vae']['held_out_recon_mse']:.5f}", flush=True)
    return vae


def train_unet(args, batches: Batches, vae, text_encoder, unet, ids: torch.Tensor, log: dict, script_start: float):
    from diffusers import DDPMScheduler

    alphas = DDPMScheduler(**SD_CONFIG).alphas_cumprod.to(args.device)
    scaling = vae.config.scaling_factor
    params = list(unet.parameters()) + list(text_encoder.parameters())
    opt = torch.optim.AdamW(params, lr=args.lr, weight_decay=0.01)
    ema_unet, ema_text = copy.deepcopy(unet).requires_grad_(False), copy.deepcopy(text_encoder).requires_grad_(False)
    ema_params = list(ema_unet.parameters()) + list(ema_text.parameters())
    total = None if args.unet_steps == "auto" else int(args.unet_steps)
    warmup, probe, ema = 200, 60, 0.995
    start, losses = time.time(), []
    step = 0
    while total is None or step < total:
        if total is None and step == probe:  # timed over the last half of the probe (the first steps are slow)
            per_step = (time.time() - probe_start) / (probe // 2)
            total = max(100, int((args.deadline_s - 30 - (time.time() - script_start)) / per_step) // 100 * 100)
            print(f"unet: {per_step * 1000:.1f} ms a step -> {total} steps", flush=True)
        if step == probe // 2:
            probe_start = time.time()
        if time.time() - script_start > args.deadline_s:
            print(f"unet: deadline reached at step {step} of {total}", flush=True)
            log["unet_stopped_early_at"] = step
            break
        for group in opt.param_groups:
            group["lr"] = args.lr * lr_factor(step, total or 10 ** 9, warmup)
        images, captions = batches.draw(args.batch, args.caption_dropout)
        with torch.no_grad(), torch.autocast(args.device.split(":")[0], dtype=torch.bfloat16):
            latents = vae.encode(images).latent_dist.sample(generator=batches.gen).float() * scaling
        noise = torch.randn(latents.shape, generator=batches.gen, device=args.device)
        # Half the timesteps uniform, half in the noisiest fifth: generation starts from pure noise, where the
        # layout (the position) can come only from the text, while at lower noise the noisy latent already
        # shows it; without the extra weight the model learns colours long before positions.
        n_train = SD_CONFIG["num_train_timesteps"]
        t = torch.where(batches.rand(args.batch) < 0.5,
                        torch.randint(0, n_train, (args.batch,), generator=batches.gen, device=args.device),
                        torch.randint(n_train * 4 // 5, n_train, (args.batch,), generator=batches.gen, device=args.device))
        a = alphas[t].view(-1, 1, 1, 1)
        noisy = a.sqrt() * latents + (1 - a).sqrt() * noise
        with torch.autocast(args.device.split(":")[0], dtype=torch.bfloat16):
            context = text_encoder(ids[captions]).last_hidden_state
            pred = unet(noisy, t, encoder_hidden_states=context).sample
        loss = F.mse_loss(pred.float(), noise)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        decay = min(ema, (1 + step) / (10 + step))
        torch._foreach_lerp_(ema_params, params, 1 - decay)
        if step % 500 == 0 or (total is not None and step == total - 1):
            losses.append((step, float(loss)))
            print(f"unet step {step}/{total}: loss {float(loss):.4f} ({time.time() - start:.0f} s)", flush=True)
        step += 1
    log["unet"] = {"steps": step, "planned_steps": total, "batch": args.batch, "lr": args.lr, "warmup": warmup, "ema": ema, "timesteps": "half uniform, half in [800, 1000)",
                   "caption_dropout": args.caption_dropout, "loss": losses, "seconds": round(time.time() - start, 1)}
    return ema_unet.eval(), ema_text.eval()


def f16_rounded_(module):
    """The weights as shipped (f16), kept in f32 for computing."""
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(p.to(torch.float16).to(torch.float32))
    return module


def test_prompts(held_out: list, seed: int) -> list:
    """The prompts the C++ test draws: every held-out combination once, and as many trained ones, each at
    a position (the centre, i.e. no position phrase, included), each with its own seed."""
    rng = random.Random(seed + 1)
    trained = [t for t in shapes.all_triples() if t not in held_out]
    picks = [(t, True) for t in held_out] + [(t, False) for t in rng.sample(trained, len(held_out))]
    out = []
    for i, ((fg, bg, s), is_held_out) in enumerate(picks):
        position = shapes.POSITION_NAMES[i % len(shapes.POSITIONS)]
        out.append({"prompt": shapes.caption(fg, bg, s, position), "colour": fg, "background": bg, "shape": s,
                    "position": position, "held_out": is_held_out, "seed": 1000 + i})
    return out


def evaluate(pipe, cases: list, device: str) -> dict:
    """Generates every case with diffusers' pipeline at hipdiffusion's defaults and reads it back."""
    import numpy as np

    results = []
    for i in range(0, len(cases), 32):
        chunk = cases[i:i + 32]
        gens = [torch.Generator("cpu").manual_seed(c["seed"]) for c in chunk]
        with torch.no_grad():
            images = pipe(prompt=[c["prompt"] for c in chunk], generator=gens, output_type="np",
                          **GENERATE_DEFAULTS).images
        for c, img in zip(chunk, images):
            got = shapes.read_picture(np.round(img * 255))
            results.append({**c, "read": got, "ok": {k: got[k] == c[k] for k in ("colour", "background", "position")}})
    summary = {}
    for group, subset in (("held_out", [r for r in results if r["held_out"]]),
                          ("trained", [r for r in results if not r["held_out"]]), ("all", results)):
        if not subset:
            continue
        summary[group] = {k: sum(r["ok"][k] for r in subset) / len(subset) for k in ("colour", "background", "position")}
        summary[group]["all_three"] = sum(all(r["ok"].values()) for r in subset) / len(subset)
        summary[group]["count"] = len(subset)
    return {"summary": summary, "failures": [{k: r[k] for k in ("prompt", "seed", "read")} for r in results
                                             if not all(r["ok"].values())][:40]}


def main():
    args = parse_args()
    script_start = time.time()
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.manual_seed(args.seed)
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cudnn.benchmark = False
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    import diffusers
    import transformers
    from transformers import CLIPTokenizer

    out = args.out
    tok_dir = out / "tokenizer_src"
    vocab = vocabulary.build(args.clip_merges, tok_dir)
    tokenizer = CLIPTokenizer(str(tok_dir / "vocab.json"), str(tok_dir / "merges.txt"), pad_token="<|endoftext|>",
                              model_max_length=77)
    captions = shapes.all_captions() + [""]
    ids = tokenizer(captions, padding="max_length", max_length=77, truncation=True, return_tensors="pt").input_ids
    ids = ids.to(args.device)

    held_out = shapes.held_out_triples(args.seed)
    trained = [t for t in shapes.all_triples() if t not in held_out]
    log = {"seed": args.seed, "torch": torch.__version__, "diffusers": diffusers.__version__,
           "transformers": transformers.__version__, "device": torch.cuda.get_device_name() if args.device.startswith("cuda") else args.device,
           "date": time.strftime("%Y-%m-%d"), "held_out_triples": held_out, "vocabulary_size": len(vocab)}
    batches = Batches(trained, args.device, args.seed)
    vae = train_vae(args, batches, log)
    torch.manual_seed(args.seed + 1)
    text_encoder = make_text_encoder(vocab).to(args.device).train()
    unet = make_unet().to(args.device).train()
    log["parameters"] = {"text_encoder": sum(p.numel() for p in text_encoder.parameters()),
                         "unet": sum(p.numel() for p in unet.parameters()),
                         "vae": sum(p.numel() for p in vae.parameters())}
    print("parameters:", log["parameters"], flush=True)
    unet, text_encoder = train_unet(args, batches, vae, text_encoder, unet, ids, log, script_start)

    from diffusers import EulerDiscreteScheduler, StableDiffusionPipeline

    for m in (unet, text_encoder, vae):
        f16_rounded_(m.float())
    pipe = StableDiffusionPipeline(vae=vae, text_encoder=text_encoder, tokenizer=tokenizer, unet=unet,
                                   scheduler=EulerDiscreteScheduler(**SD_CONFIG), safety_checker=None,
                                   feature_extractor=None, requires_safety_checker=False)
    pipe.set_progress_bar_config(disable=True)
    cases = test_prompts(held_out, args.seed)
    log["test_prompts"] = cases
    rng = random.Random(args.seed + 2)
    extra = []
    for i in range(args.eval_prompts):
        triple = rng.choice(held_out if i % 2 == 0 else trained)
        position = rng.choice(shapes.POSITION_NAMES)
        extra.append({"prompt": shapes.caption(*triple, position), "colour": triple[0], "background": triple[1],
                      "shape": triple[2], "position": position, "held_out": i % 2 == 0, "seed": 5000 + i})
    log["accuracy_test_prompts"] = evaluate(pipe, cases, args.device)
    log["accuracy_more_prompts"] = evaluate(pipe, extra, args.device)
    print(json.dumps({k: log[k]["summary"] for k in ("accuracy_test_prompts", "accuracy_more_prompts")}, indent=1))

    pipe.to(torch.float16)
    pipe.save_pretrained(str(out), safe_serialization=True)
    import shutil
    shutil.rmtree(tok_dir)
    log["total_seconds"] = round(time.time() - script_start, 1)
    (out / "training.json").write_text(json.dumps(log, indent=1) + "\n")
    print(f"wrote {out} in {log['total_seconds']} s")


if __name__ == "__main__":
    main()
