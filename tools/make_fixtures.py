#!/usr/bin/env python3
"""Records what PyTorch and diffusers themselves compute, as fixtures for hipDiffusion's tests.

Runs where PyTorch is (the device machine), with diffusers installed from a carried wheel:
    python3 tools/make_fixtures.py --only sampling --out tests/fixtures

Sections:
  sampling  torch's CPU generator (torch.randn after manual_seed) and the diffusers schedulers that
            `hipdiffusion generate` reproduces (EulerDiscrete, EulerAncestralDiscrete, DDIM,
            DPMSolverMultistep), over every timestep spacing, schedule and prediction type.
  tokenizer CLIP's byte-level BPE vocabulary (rebuilt from the merges file that the open_clip_torch
            package ships, which is the vocabulary of openai/clip-vit-large-patch14) saved as
            vocab.json + merges.txt, and transformers' CLIPTokenizer ids for tricky prompts, with both
            pad tokens that Stable Diffusion uses (SD1.x pads with <|endoftext|>, SD2.x with "!").
  single_file  the tiny models written as single-file LDM checkpoints (SD2.x's text encoder and SDXL's
            second in OpenCLIP form), each verified by loading it with diffusers' from_single_file
            (run after "models" and "sdxl_pipeline").
  tiled_vae diffusers' AutoencoderKL decode of the built-in shapes model's VAE, whole and tiled
            (enable_tiling), on seeded latents larger than one tile.
  sdxl      a tiny SDXL-like UNet (three levels, the first without attention, transformer depths 1/2/3,
            linear projections, text-time conditioning on a pooled embedding and six size ids), f16
            weights perturbed as above, saved as tiny_sdxl/unet, and its outputs at two timesteps.
  sdxl_pipeline  a tiny SDXL pipeline (both text encoders, head size 16, SDXL's VAE settings) saved as
            tiny_sdxl_pipeline/, encode_prompt's outputs, the micro-conditioning ids, and whole
            StableDiffusionXLPipeline runs: samplers, CFG on and off, no negative prompt (zeros), given
            micro-conditioning, 32x24, Turbo-style runs (trailing spacing, 1-4 steps, no guidance), and
            StableDiffusionXLImg2ImgPipeline runs of the base model (run after "models" and "img2img": it
            takes their tokenizers and init image).
  lora      LoRA files for the tiny SD1.x and SDXL pipelines in kohya's and diffusers' (PEFT) forms, and
            whole runs of those pipelines with each fused by diffusers (tools/lora_fixtures.py; needs
            peft; run after "models" and "sdxl_pipeline").
  sdxl_refiner  a tiny SDXL refiner (encoder 2 only, aesthetic-score conditioning) saved as a folder and a
            single file, its img2img runs and base + refiner "ensemble of expert denoisers" runs
            (tools/sdxl_refiner_fixtures.py; run after "sdxl_pipeline").
  img2img   StableDiffusionImg2ImgPipeline runs of those tiny models from a seeded random image, over
            samplers, schedules and strengths (run after "models"; it reads them from tests/fixtures).
  models    two tiny Stable Diffusion pipelines, SD1.x-like (quick_gelu, conv projections, epsilon)
            and SD2.x-like (gelu, linear projections, v-prediction, pad "!"), with seeded random weights
            perturbed so that no norm or bias is an identity, saved in the diffusers layout (f16 UNet
            and VAE, as users' checkpoints are; references computed in f32 on those f16 values); the
            outputs of each component on fixed inputs; and whole txt2img runs (latents and images) for
            every sampler and schedule, with and without classifier-free guidance.


Fixtures are safetensors files (NCHW tensors, as diffusers holds them) with a JSON description of
each case in the header's __metadata__.
"""
import argparse
import json
import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent / "train_tiny"))
from vocabulary import bytes_to_unicode  # noqa: E402  (CLIP's byte alphabet, shared with the shapes model's vocabulary)


def save(tensors: dict, meta: dict, path: Path) -> None:
    from safetensors.torch import save_file

    path.parent.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(path),
              metadata={"cases": json.dumps(meta, sort_keys=True), "torch": torch.__version__})
    print(f"wrote {path} ({path.stat().st_size} bytes, {len(tensors)} tensors)")


# ---------------------------------------------------------------------------------------------------
# torch's CPU generator

RNG_CASES = [
    # (seed, list of shapes drawn one after another from the same generator)
    (0, [[1, 4, 8, 8]]),                  # a multiple of 16: the vectorised Box-Muller path only
    (42, [[2, 4, 9, 7], [3]]),           # 504 values (tail of 16 recomputed), then 3 (< 16: scalar path)
    (1234, [[5], [7], [16]]),             # scalar path twice (with its cached second sample), then 16
    (2**32 + 7, [[1, 4, 4, 4]]),          # a seed above 32 bits
    (2**63 - 25, [[1, 4, 3, 3], [2]]),
]


def rng_fixtures(out: Path) -> None:
    tensors, meta = {}, []
    for seed, shapes in RNG_CASES:
        g = torch.Generator("cpu").manual_seed(seed)
        for i, shape in enumerate(shapes):
            name = f"seed{seed}_draw{i}"
            tensors[name] = torch.randn(shape, generator=g, dtype=torch.float32)
            meta.append({"name": name, "seed": str(seed), "draw": i, "shape": shape})
    save(tensors, meta, out / "sampling" / "torch_randn.safetensors")


# ---------------------------------------------------------------------------------------------------
# schedulers

# Stable Diffusion's own scheduler settings (v1-5 and 2-1 scheduler_config.json).
SD_CONFIG = dict(num_train_timesteps=1000, beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear",
                 steps_offset=1)
SAMPLERS = ["euler", "euler_a", "ddim", "dpmpp_2m"]
SCHEDULES = ["discrete", "karras"]
SPACINGS = ["leading", "trailing", "linspace"]
PREDICTIONS = ["epsilon", "v_prediction"]
STEPS = 7  # odd, so that DPM-Solver++(2M)'s lower-order final step is exercised
SHAPE = [1, 4, 6, 8]  # [N, C, H, W], not square, so that a transposition error shows


def make_scheduler(sampler: str, schedule: str, spacing: str, prediction: str):
    import diffusers

    cfg = dict(SD_CONFIG, timestep_spacing=spacing, prediction_type=prediction)
    karras = schedule == "karras"
    if sampler == "euler":
        return diffusers.EulerDiscreteScheduler(**cfg, use_karras_sigmas=karras)
    if sampler == "euler_a":
        if karras:
            return None  # EulerAncestralDiscreteScheduler has no Karras option in diffusers
        return diffusers.EulerAncestralDiscreteScheduler(**cfg)
    if sampler == "ddim":
        if karras:
            return None  # neither has DDIMScheduler
        return diffusers.DDIMScheduler(**cfg, clip_sample=False, set_alpha_to_one=False)
    if sampler == "dpmpp_2m":
        return diffusers.DPMSolverMultistepScheduler(**cfg, algorithm_type="dpmsolver++", solver_order=2,
                                                     lower_order_final=True, use_karras_sigmas=karras)
    raise ValueError(sampler)


def fake_model(scaled: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """A smooth stand-in for a UNet: depends on the input and the timestep, like the real one."""
    phase = float(t) / 1000.0
    return torch.tanh(0.7 * scaled + phase) - 0.3 * torch.roll(scaled, shifts=1, dims=1) * phase


def scheduler_fixtures(out: Path) -> None:
    tensors, meta = {}, []
    seed = 7
    for sampler in SAMPLERS:
        for schedule in SCHEDULES:
            for spacing in SPACINGS:
                for prediction in PREDICTIONS:
                    sched = make_scheduler(sampler, schedule, spacing, prediction)
                    if sched is None:
                        continue
                    name = f"{sampler}_{schedule}_{spacing}_{prediction}"
                    sched.set_timesteps(STEPS)
                    g = torch.Generator("cpu").manual_seed(seed)
                    # As the pipelines do: initial noise from the generator, scaled by init_noise_sigma;
                    # ancestral steps draw further noise from the same generator.
                    sample = torch.randn(SHAPE, generator=g, dtype=torch.float32) * sched.init_noise_sigma
                    tensors[f"{name}.timesteps"] = sched.timesteps.to(torch.float32)
                    if hasattr(sched, "sigmas") and sched.sigmas is not None:
                        tensors[f"{name}.sigmas"] = torch.as_tensor(sched.sigmas, dtype=torch.float32)
                    tensors[f"{name}.sample0"] = sample.clone()
                    for i, t in enumerate(sched.timesteps):
                        scaled = sched.scale_model_input(sample, t)
                        model_output = fake_model(scaled, t)
                        kwargs = {"generator": g} if sampler == "euler_a" else {}
                        if sampler == "ddim":
                            kwargs["eta"] = 0.0
                        sample = sched.step(model_output, t, sample, **kwargs).prev_sample
                        tensors[f"{name}.scaled{i}"] = scaled.clone()
                        tensors[f"{name}.model_output{i}"] = model_output.clone()
                        tensors[f"{name}.sample{i + 1}"] = sample.clone()
                    meta.append({"name": name, "sampler": sampler, "schedule": schedule, "spacing": spacing,
                                 "prediction": prediction, "steps": STEPS, "seed": seed, "shape": SHAPE,
                                 "init_noise_sigma": float(sched.init_noise_sigma)})
    save(tensors, {"config": SD_CONFIG, "cases": meta}, out / "sampling" / "schedulers.safetensors")


# ---------------------------------------------------------------------------------------------------
# tokenizer

PROMPTS = [
    "a photograph of an astronaut riding a horse",
    "A Photo OF a CAT, 4k; highly-detailed!!",
    "  multiple   spaces\tand\ttabs\nand newlines  ",
    "it's the artist's dog -- they'll say they've seen what we'd do",
    "numbers 1234567 and 3.14159 and 1,000,000 and 42nd street",
    "Café crème, naïve façade, Ångström, ÆØÅ, straße",
    "日本語のテキスト and 中文 mixed",
    "emoji 🐱🚀 and symbols ©®™ and math ∑∫√",
    "(masterpiece:1.2), [best quality], {detailed}, <lora:abc:0.5>",
    "ΣΊΣΥΦΟΣ ΟΔΟΣ Ⅻ ①",
    "",
    " ".join(["a very long prompt"] * 30),
]


def tokenizer_fixtures(out: Path, bpe_gz: Path) -> None:
    import gzip
    from transformers import CLIPTokenizer

    lines = gzip.open(bpe_gz).read().decode("utf-8").split("\n")
    merges = lines[1:49152 - 256 - 2 + 1]
    base = list(bytes_to_unicode().values())
    vocab = base + [v + "</w>" for v in base] + ["".join(m.split()) for m in merges] + \
        ["<|startoftext|>", "<|endoftext|>"]
    folder = out / "tokenizer" / "clip"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "vocab.json").write_text(json.dumps({v: i for i, v in enumerate(vocab)}, ensure_ascii=False))
    (folder / "merges.txt").write_text("#version: 0.2\n" + "\n".join(merges) + "\n")
    tensors, meta = {}, []
    for pad in ["<|endoftext|>", "!"]:
        tok = CLIPTokenizer(str(folder / "vocab.json"), str(folder / "merges.txt"), pad_token=pad)
        for i, prompt in enumerate(PROMPTS):
            ids = tok(prompt, padding="max_length", max_length=77, truncation=True).input_ids
            name = f"pad{0 if pad == '!' else 1}_prompt{i}"
            tensors[name] = torch.tensor(ids, dtype=torch.int64)
            meta.append({"name": name, "prompt": prompt, "pad_token": pad})
    import transformers
    print(f"transformers {transformers.__version__}, {type(tok).__name__}, "
          f"ftfy used: {getattr(tok, 'fix_text', None) is not None}, backend: {getattr(tok, 'backend_tokenizer', None)}")
    save(tensors, meta, out / "tokenizer" / "clip_token_ids.safetensors")


# ---------------------------------------------------------------------------------------------------
# tiny Stable Diffusion models: every component, the scheduler config, and whole-pipeline runs

def perturb_(module: torch.nn.Module, seed: int, scale: float = 0.1) -> None:
    """Adds noise to every parameter: a LayerNorm of ones and zeros would hide a missing gamma or beta."""
    g = torch.Generator("cpu").manual_seed(seed)
    with torch.no_grad():
        for _, p in sorted(module.named_parameters()):
            p.add_(torch.randn(p.shape, generator=g, dtype=p.dtype) * scale)


def f16_rounded_(module: torch.nn.Module) -> torch.nn.Module:
    """Rounds the weights to f16 (as they are stored) and computes in f32, like the CPU engine."""
    return module.to(torch.float16).to(torch.float32)


def tiny_tokenizer(folder: Path, bpe_gz: Path, pad: str):
    """CLIP's byte-level BPE cut down to its first 470 merges: every token a prompt can produce is in a
    984-entry vocabulary, which a tiny text encoder (1000 embeddings) covers."""
    import gzip
    from transformers import CLIPTokenizer

    merges = gzip.open(bpe_gz).read().decode("utf-8").split("\n")[1:471]
    base = list(bytes_to_unicode().values())
    vocab = base + [v + "</w>" for v in base] + ["".join(m.split()) for m in merges] + ["<|startoftext|>", "<|endoftext|>"]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "vocab.json").write_text(json.dumps({v: i for i, v in enumerate(vocab)}, ensure_ascii=False))
    (folder / "merges.txt").write_text("#version: 0.2\n" + "\n".join(merges) + "\n")
    return CLIPTokenizer(str(folder / "vocab.json"), str(folder / "merges.txt"), pad_token=pad, model_max_length=77)


FAMILIES = {
    # SD1.x: CLIP ViT-L's quick_gelu, convolutional transformer projections, epsilon, pad <|endoftext|>
    "sd1": dict(act="quick_gelu", unet=dict(attention_head_dim=4), prediction="epsilon", pad="<|endoftext|>"),
    # SD2.x: gelu, linear projections, heads per level, v-prediction, pad "!"
    "sd2": dict(act="gelu", unet=dict(attention_head_dim=(2, 4), use_linear_projection=True),
                prediction="v_prediction", pad="!"),
}
PIPELINE_RUNS = [("euler", "discrete"), ("euler", "karras"), ("euler_a", "discrete"), ("ddim", "discrete"),
                 ("dpmpp_2m", "discrete"), ("dpmpp_2m", "karras")]


def model_fixtures(out: Path, bpe_gz: Path) -> None:
    import diffusers
    from diffusers import AutoencoderKL, StableDiffusionPipeline, UNet2DConditionModel
    from transformers import CLIPTextConfig, CLIPTextModel

    for family, spec in FAMILIES.items():
        folder = out / "models" / f"tiny_{family}"
        tokenizer = tiny_tokenizer(folder / "tokenizer_src", bpe_gz, spec["pad"])
        torch.manual_seed(11)
        text_encoder = CLIPTextModel(CLIPTextConfig(
            vocab_size=1000, hidden_size=32, intermediate_size=37, num_hidden_layers=3, num_attention_heads=4,
            max_position_embeddings=77, hidden_act=spec["act"], layer_norm_eps=1e-5,
            bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
            pad_token_id=tokenizer.pad_token_id)).eval()
        perturb_(text_encoder, 12)
        torch.manual_seed(31)
        unet = UNet2DConditionModel(sample_size=16, in_channels=4, out_channels=4, layers_per_block=2,
                                    block_out_channels=(32, 64), down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
                                    up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"), cross_attention_dim=32,
                                    norm_num_groups=8, **spec["unet"]).eval()
        perturb_(unet, 32, scale=0.05)
        unet = f16_rounded_(unet)
        torch.manual_seed(21)
        vae = AutoencoderKL(in_channels=3, out_channels=3, down_block_types=("DownEncoderBlock2D",) * 2,
                            up_block_types=("UpDecoderBlock2D",) * 2, block_out_channels=(32, 64), layers_per_block=1,
                            latent_channels=4, norm_num_groups=16, sample_size=32, scaling_factor=0.18215).eval()
        perturb_(vae, 22, scale=0.05)
        vae = f16_rounded_(vae)
        scheduler = diffusers.EulerDiscreteScheduler(**SD_CONFIG, prediction_type=spec["prediction"])
        pipe = StableDiffusionPipeline(vae=vae, text_encoder=text_encoder, tokenizer=tokenizer, unet=unet,
                                       scheduler=scheduler, safety_checker=None, feature_extractor=None,
                                       requires_safety_checker=False)
        pipe.set_progress_bar_config(disable=True)
        # Stored as users' checkpoints are: f16 UNet and VAE, f32 text encoder.
        unet.to(torch.float16); vae.to(torch.float16)
        pipe.save_pretrained(str(folder), safe_serialization=True)
        unet.to(torch.float32); vae.to(torch.float32)
        import shutil
        shutil.rmtree(folder / "tokenizer_src")

        # Components, on fixed inputs.
        g = torch.Generator("cpu").manual_seed(13)
        ids = tokenizer(["a red circle on a blue background", ""], padding="max_length", max_length=77,
                        truncation=True, return_tensors="pt").input_ids
        sample = torch.randn((2, 4, 8, 6), generator=g)
        context = torch.randn((2, 77, 32), generator=g)
        latents = torch.randn((2, 4, 6, 5), generator=g)
        image = torch.rand((1, 3, 12, 10), generator=g) * 2 - 1
        tensors = {"input_ids": ids, "sample": sample, "context": context, "latents": latents, "image": image}
        with torch.no_grad():
            tensors["last_hidden_state"] = text_encoder(ids).last_hidden_state
            tensors["unet_t537"] = unet(sample, torch.tensor(537.0), encoder_hidden_states=context).sample
            tensors["unet_t12.25"] = unet(sample, torch.tensor(12.25), encoder_hidden_states=context).sample
            tensors["decoded"] = vae.decode(latents).sample
            tensors["moments"] = vae.encode(image).latent_dist.parameters
        save(tensors, [{"name": "components", "family": family}], out / "models" / f"tiny_{family}_components.safetensors")

        # Whole pipelines: every sampler and schedule, with and without classifier-free guidance.
        runs, meta = {}, []
        for sampler, schedule in PIPELINE_RUNS:
            base = make_scheduler(sampler, schedule, "leading", spec["prediction"])
            pipe.scheduler = base
            for cfg in [7.5, 1.0]:
                name = f"{sampler}_{schedule}_cfg{cfg}"
                kwargs = dict(prompt="a red circle on a blue background", num_inference_steps=5, guidance_scale=cfg,
                              height=32, width=32, generator=torch.Generator("cpu").manual_seed(42),
                              output_type="latent")
                if cfg > 1:
                    kwargs["negative_prompt"] = "blurry, green"
                with torch.no_grad():
                    lat = pipe(**kwargs).images
                    img = (vae.decode(lat / vae.config.scaling_factor).sample / 2 + 0.5).clamp(0, 1)
                runs[f"{name}.latents"] = lat
                runs[f"{name}.image"] = img
                meta.append({"name": name, "sampler": sampler, "schedule": schedule, "cfg": cfg, "steps": 5,
                             "seed": 42, "prompt": kwargs["prompt"], "negative_prompt": kwargs.get("negative_prompt", ""),
                             "width": 32, "height": 32})
        save(runs, meta, out / "models" / f"tiny_{family}_pipeline.safetensors")


def img2img_fixtures(out: Path) -> None:
    """img2img runs of diffusers' StableDiffusionImg2ImgPipeline on the tiny models saved by the models
    section (read from tests/fixtures, which travels with the repository), from a seeded random image."""
    import diffusers
    import numpy as np
    from PIL import Image

    g = np.random.default_rng(51)
    init = Image.fromarray(g.integers(0, 256, size=(32, 24, 3), dtype=np.uint8))  # 24 wide, 32 high
    (out / "models").mkdir(parents=True, exist_ok=True)
    init.save(out / "models" / "img2img_init.png")
    runs = [("euler", "discrete", 0.6), ("euler_a", "discrete", 0.75), ("ddim", "discrete", 0.5),
            ("dpmpp_2m", "karras", 0.8), ("dpmpp_2m", "discrete", 1.0)]
    for family, spec in FAMILIES.items():
        pipe = diffusers.StableDiffusionImg2ImgPipeline.from_pretrained(
            f"tests/fixtures/models/tiny_{family}", torch_dtype=torch.float32, safety_checker=None,
            requires_safety_checker=False)
        pipe.set_progress_bar_config(disable=True)
        tensors, meta = {}, []
        for sampler, schedule, strength in runs:
            pipe.scheduler = make_scheduler(sampler, schedule, "leading", spec["prediction"])
            name = f"{sampler}_{schedule}_s{strength}"
            with torch.no_grad():
                lat = pipe(prompt="a red circle on a blue background", negative_prompt="blurry", image=init,
                           strength=strength, num_inference_steps=6, guidance_scale=7.5,
                           generator=torch.Generator("cpu").manual_seed(77), output_type="latent").images
                img = (pipe.vae.decode(lat / pipe.vae.config.scaling_factor).sample / 2 + 0.5).clamp(0, 1)
            tensors[f"{name}.latents"] = lat
            tensors[f"{name}.image"] = img
            meta.append({"name": name, "sampler": sampler, "schedule": schedule, "strength": strength, "steps": 6,
                         "cfg": 7.5, "seed": 77, "prompt": "a red circle on a blue background",
                         "negative_prompt": "blurry"})
        save(tensors, meta, out / "models" / f"tiny_{family}_img2img.safetensors")


def open_clip_names(te: dict, m: str, extra_layer: bool, g) -> dict:
    """A transformers CLIP text encoder's weights under OpenCLIP's names (prefix m): fused q/k/v, and
    text_projection as OpenCLIP applies it (x @ P, the transpose of transformers' weight). SD2.x's file
    has one layer more than transformers keeps (SD2.x conditions on the penultimate): random, so that
    using it would show; without a text projection in `te` (SD2.x), a random one (unused)."""
    te = {(k[len("text_model."):] if k.startswith("text_model.") else k): v for k, v in te.items()}
    layers = sum(1 for k in te if k.endswith("layer_norm1.weight"))
    width = te["embeddings.token_embedding.weight"].shape[1]
    out = {m + "token_embedding.weight": te["embeddings.token_embedding.weight"],
           m + "positional_embedding": te["embeddings.position_embedding.weight"],
           m + "ln_final.weight": te["final_layer_norm.weight"], m + "ln_final.bias": te["final_layer_norm.bias"]}
    for i in range(layers + (1 if extra_layer else 0)):
        src = f"encoder.layers.{min(i, layers - 1)}."
        r = f"{m}transformer.resblocks.{i}."
        extra = i == layers

        def get(name):
            t = te[src + name]
            return torch.randn(t.shape, generator=g) if extra else t
        out[r + "attn.in_proj_weight"] = torch.cat([get("self_attn.q_proj.weight"), get("self_attn.k_proj.weight"), get("self_attn.v_proj.weight")])
        out[r + "attn.in_proj_bias"] = torch.cat([get("self_attn.q_proj.bias"), get("self_attn.k_proj.bias"), get("self_attn.v_proj.bias")])
        for ours, theirs in [("attn.out_proj", "self_attn.out_proj"), ("ln_1", "layer_norm1"), ("ln_2", "layer_norm2"),
                             ("mlp.c_fc", "mlp.fc1"), ("mlp.c_proj", "mlp.fc2")]:
            out[r + ours + ".weight"] = get(theirs + ".weight")
            out[r + ours + ".bias"] = get(theirs + ".bias")
    projection = te.get("text_projection.weight")
    out[m + "text_projection"] = projection.T if projection is not None else torch.randn((width, width), generator=g)
    return out


RESNET_NAMES = {"norm1": "in_layers.0", "conv1": "in_layers.2", "norm2": "out_layers.0", "conv2": "out_layers.3",
                "time_emb_proj": "emb_layers.1", "conv_shortcut": "skip_connection"}


def ldm_resnet_name(rest: str, shortcut: str = "skip_connection") -> str:
    head, tail = rest.split(".", 1)
    names = dict(RESNET_NAMES, conv_shortcut=shortcut)
    return names.get(head, head) + "." + tail


def ldm_unet_name(k: str, lpb: int, attn_levels: list) -> str:
    """A UNet tensor's diffusers name as single-file (LDM) checkpoints name it, for a UNet with `lpb`
    layers per block and attention at the up levels where `attn_levels` says (the inverse of the usual
    conversion)."""
    p = k.split(".")
    resnet = ldm_resnet_name
    if k.startswith("time_embedding.linear_1."): return "time_embed.0." + p[-1]
    if k.startswith("time_embedding.linear_2."): return "time_embed.2." + p[-1]
    if k.startswith("add_embedding.linear_1."): return "label_emb.0.0." + p[-1]  # SDXL's text-time embedding
    if k.startswith("add_embedding.linear_2."): return "label_emb.0.2." + p[-1]
    if k.startswith("conv_in."): return "input_blocks.0.0." + p[-1]
    if k.startswith("conv_norm_out."): return "out.0." + p[-1]
    if k.startswith("conv_out."): return "out.2." + p[-1]
    if k.startswith("down_blocks."):
        level, kind = int(p[1]), p[2]
        if kind == "downsamplers":
            return f"input_blocks.{1 + level * (lpb + 1) + lpb}.0.op.{p[-1]}"
        j, rest = int(p[3]), ".".join(p[4:])
        idx = 1 + level * (lpb + 1) + j
        return f"input_blocks.{idx}.0.{resnet(rest)}" if kind == "resnets" else f"input_blocks.{idx}.1.{rest}"
    if k.startswith("mid_block."):
        kind, j, rest = p[1], int(p[2]), ".".join(p[3:])
        return f"middle_block.1.{rest}" if kind == "attentions" else f"middle_block.{0 if j == 0 else 2}.{resnet(rest)}"
    if k.startswith("up_blocks."):
        level, kind = int(p[1]), p[2]
        if kind == "upsamplers":
            return f"output_blocks.{level * (lpb + 1) + lpb}.{2 if attn_levels[level] else 1}.conv.{p[-1]}"
        j, rest = int(p[3]), ".".join(p[4:])
        idx = level * (lpb + 1) + j
        return f"output_blocks.{idx}.0.{resnet(rest)}" if kind == "resnets" else f"output_blocks.{idx}.1.{rest}"
    raise ValueError(k)


def to_ldm_single_file(folder: Path, family: str) -> dict:
    """The tiny pipeline's weights under single-file (LDM) names, written from diffusers' names by the
    inverse of the usual conversion. Checked below by diffusers' own single-file loader."""
    from safetensors.torch import load_file

    unet = load_file(str(folder / "unet" / "diffusion_pytorch_model.safetensors"))
    vae = load_file(str(folder / "vae" / "diffusion_pytorch_model.safetensors"))
    te = load_file(str(folder / "text_encoder" / "model.safetensors"))
    unet_cfg = json.loads((folder / "unet" / "config.json").read_text())
    # diffusers' defaults (UNet2DConditionModel) where the config leaves them out, as the random models'
    # configs written by `hipdiffusion bench --arch sd15` do.
    lpb = unet_cfg.get("layers_per_block", 2)
    up_types = unet_cfg.get("up_block_types", ["UpBlock2D"] + ["CrossAttnUpBlock2D"] * 3)
    attn_levels = [t.startswith("CrossAttn") for t in up_types]
    out = {"model.diffusion_model." + ldm_unet_name(k, lpb, attn_levels): v for k, v in unet.items()}

    levels = len(json.loads((folder / "vae" / "config.json").read_text())["block_out_channels"])
    attn_names = {"group_norm": "norm", "to_q": "q", "to_k": "k", "to_v": "v", "to_out": "proj_out"}
    for k, v in vae.items():
        p = k.split(".")
        side = p[0]
        if p[1] in ("down_blocks", "up_blocks"):
            level = int(p[2]) if p[1] == "down_blocks" else levels - 1 - int(p[2])
            base = f"{side}.{'down' if p[1] == 'down_blocks' else 'up'}.{level}"
            if p[3] == "resnets":
                n = f"{base}.block.{p[4]}.{ldm_resnet_name('.'.join(p[5:]), 'nin_shortcut')}"
                n = n.replace("in_layers.0", "norm1").replace("in_layers.2", "conv1").replace("out_layers.0", "norm2").replace("out_layers.3", "conv2")
            else:
                n = f"{base}.{'downsample' if p[1] == 'down_blocks' else 'upsample'}.conv.{p[-1]}"
        elif p[1] == "mid_block":
            if p[2] == "attentions":
                head = attn_names[p[4]]
                n = f"{side}.mid.attn_1.{head}.{p[-1]}"
                if v.dim() == 2:
                    v = v[:, :, None, None]  # LDM stores them as 1x1 convolutions
            else:
                n = f"{side}.mid.block_{int(p[3]) + 1}.{'.'.join(p[4:])}"
        elif p[1] == "conv_norm_out":
            n = f"{side}.norm_out.{p[-1]}"
        else:
            n = k
        out["first_stage_model." + n] = v

    g = torch.Generator("cpu").manual_seed(61)
    if family == "sd1":
        for k, v in te.items():
            out["cond_stage_model.transformer." + (k if k.startswith("text_model.") else "text_model." + k)] = v
    elif family == "sd2":
        out.update(open_clip_names(te, "cond_stage_model.model.", True, g))
    else:  # SDXL: CLIP ViT-L in transformers' names, OpenCLIP ViT-bigG (all its layers) in OpenCLIP's
        for k, v in te.items():
            out["conditioner.embedders.0.transformer." + (k if k.startswith("text_model.") else "text_model." + k)] = v
        te2 = load_file(str(folder / "text_encoder_2" / "model.safetensors"))
        out.update(open_clip_names(te2, "conditioner.embedders.1.model.", False, g))
    return {k: v.contiguous() for k, v in out.items()}


def single_file_fixtures(out: Path) -> None:
    """The tiny pipelines as single-file LDM checkpoints, verified against diffusers' from_single_file."""
    import diffusers
    from safetensors.torch import save_file

    for family in list(FAMILIES) + ["sdxl"]:
        name = "sdxl_pipeline" if family == "sdxl" else family
        folder = Path(f"tests/fixtures/models/tiny_{name}")
        state = to_ldm_single_file(folder, family)
        path = out / "models" / f"tiny_{name}.safetensors"
        path.parent.mkdir(parents=True, exist_ok=True)
        save_file(state, str(path))
        # Independent check: diffusers' own converter must read back exactly the pipeline's weights.
        cls = diffusers.StableDiffusionXLPipeline if family == "sdxl" else diffusers.StableDiffusionPipeline
        ref = cls.from_pretrained(str(folder), torch_dtype=torch.float32)
        single = cls.from_single_file(str(path), config=str(folder), torch_dtype=torch.float32, local_files_only=True)
        components = ["unet", "vae", "text_encoder"] + (["text_encoder_2"] if family == "sdxl" else [])
        for component in components:
            a, b = getattr(ref, component).state_dict(), getattr(single, component).state_dict()
            a = {k: v for k, v in a.items() if "position_ids" not in k}
            b = {k: v for k, v in b.items() if "position_ids" not in k}
            assert a.keys() == b.keys(), (family, component, sorted(set(a) ^ set(b))[:5])
            for k in a:
                assert torch.equal(a[k], b[k]), (family, component, k)
        print(f"{path}: {len(state)} tensors, read back by diffusers' from_single_file identically")


def tiled_vae_fixtures(out: Path) -> None:
    """diffusers' AutoencoderKL decode of the built-in shapes model's VAE (models/shapes-tiny, f16 weights
    computed in f32 on the CPU) on seeded latents larger than its 16-latent tiles: whole, and tiled
    (enable_tiling, diffusers' tiled_decode)."""
    from diffusers import AutoencoderKL

    vae = AutoencoderKL.from_pretrained("models/shapes-tiny", subfolder="vae", torch_dtype=torch.float32).eval()
    g = torch.Generator("cpu").manual_seed(61)
    tensors, meta = {}, []
    for name, (h, w) in {"square": (24, 24), "wide": (20, 36)}.items():
        z = torch.randn(1, 4, h, w, generator=g)
        with torch.no_grad():
            vae.disable_tiling()
            whole = vae.decode(z).sample
            vae.enable_tiling()
            tiled = vae.decode(z).sample
        tensors[f"{name}.latents"], tensors[f"{name}.whole"], tensors[f"{name}.tiled"] = z, whole, tiled
        meta.append({"name": name, "tile_latents": vae.tile_latent_min_size, "overlap": vae.tile_overlap_factor,
                     "tiled_vs_whole_relative_l2": float((tiled - whole).norm() / whole.norm())})
    save(tensors, meta, out / "models" / "shapes_tiny_tiled_vae.safetensors")


def sdxl_fixtures(out: Path) -> None:
    """A tiny UNet of SDXL's structure and its outputs, computed in f32 on its f16 weights."""
    from diffusers import UNet2DConditionModel

    torch.manual_seed(41)
    unet = UNet2DConditionModel(
        sample_size=16, in_channels=4, out_channels=4, layers_per_block=2, block_out_channels=(16, 32, 32),
        down_block_types=("DownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D"),
        up_block_types=("CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "UpBlock2D"), attention_head_dim=(2, 2, 4),
        use_linear_projection=True, transformer_layers_per_block=(1, 2, 3), addition_embed_type="text_time",
        addition_time_embed_dim=8, projection_class_embeddings_input_dim=24 + 6 * 8, cross_attention_dim=24,
        norm_num_groups=8).eval()
    perturb_(unet, 42, scale=0.05)
    unet = f16_rounded_(unet)
    folder = out / "models" / "tiny_sdxl"
    unet.to(torch.float16).save_pretrained(str(folder / "unet"), safe_serialization=True)
    unet.to(torch.float32)
    g = torch.Generator("cpu").manual_seed(43)
    # The ids as SDXL's pipeline gives them: original size, crop top-left, target size (in pixels).
    tensors = {"sample": torch.randn((2, 4, 8, 12), generator=g), "context": torch.randn((2, 10, 24), generator=g),
               "text_embeds": torch.randn((2, 24), generator=g),
               "time_ids": torch.tensor([[64.0, 96.0, 0.0, 0.0, 64.0, 96.0], [1024.0, 768.0, 16.0, 8.0, 64.0, 96.0]])}
    added = {"text_embeds": tensors["text_embeds"], "time_ids": tensors["time_ids"]}
    with torch.no_grad():
        for name, t in [("unet_t537", 537.0), ("unet_t12.25", 12.25)]:
            tensors[name] = unet(tensors["sample"], torch.tensor(t), encoder_hidden_states=tensors["context"],
                                 added_cond_kwargs=added).sample
    save(tensors, [{"name": "sdxl_unet", "parameters": sum(p.numel() for p in unet.parameters())}],
         out / "models" / "tiny_sdxl_components.safetensors")


# ---------------------------------------------------------------------------------------------------
# a tiny SDXL pipeline: both text encoders, micro-conditioning, whole runs

SDXL_PROMPT = "a red circle on a blue background"
SDXL_RUNS = [  # (name, sampler, schedule, cfg, negative prompt or None, micro-conditioning)
    ("euler_discrete_cfg5", "euler", "discrete", 5.0, "blurry, green", {}),
    ("euler_karras_cfg5", "euler", "karras", 5.0, "blurry, green", {}),
    ("euler_a_discrete_cfg5", "euler_a", "discrete", 5.0, "blurry, green", {}),
    ("ddim_discrete_cfg5", "ddim", "discrete", 5.0, "blurry, green", {}),
    ("dpmpp_2m_karras_cfg5", "dpmpp_2m", "karras", 5.0, "blurry, green", {}),
    ("euler_discrete_cfg1", "euler", "discrete", 1.0, None, {}),
    ("dpmpp_2m_discrete_cfg1", "dpmpp_2m", "discrete", 1.0, None, {}),
    # no negative prompt: force_zeros_for_empty_prompt gives zero context and zero pooled embedding
    ("euler_discrete_cfg5_zero_negative", "euler", "discrete", 5.0, None, {}),
    # micro-conditioning given, the negative one too (diffusers uses it only when both sizes are given)
    ("euler_discrete_cfg5_micro", "euler", "discrete", 5.0, "blurry, green",
     dict(original_size=(48, 40), crops_coords_top_left=(8, 4), target_size=(24, 32),
          negative_original_size=(16, 20), negative_crops_coords_top_left=(2, 6), negative_target_size=(24, 32))),
    # sizes given for the positive side only: the negative side takes the same ids
    ("euler_a_discrete_cfg5_micro_positive", "euler_a", "discrete", 5.0, "blurry, green",
     dict(original_size=(1024, 768), crops_coords_top_left=(0, 16), target_size=(20, 28))),
]
# SDXL-Turbo's way: trailing spacing, one to four steps, no guidance (guidance_scale 0).
SDXL_TURBO_RUNS = [  # (name, sampler, steps)
    ("turbo_euler_a_trailing_1step", "euler_a", 1),
    ("turbo_euler_a_trailing_4steps", "euler_a", 4),
    ("turbo_euler_trailing_2steps", "euler", 2),
]


def record_run(pipe, vae, tensors: dict, name: str, **kwargs) -> None:
    """One pipeline call's final latents and their decoded image (in [0, 1]) as "<name>.latents" and
    "<name>.image"."""
    with torch.no_grad():
        lat = pipe(output_type="latent", **kwargs).images
        tensors[f"{name}.latents"] = lat
        tensors[f"{name}.image"] = (vae.decode(lat / vae.config.scaling_factor).sample / 2 + 0.5).clamp(0, 1)


def sdxl_pipeline_fixtures(out: Path) -> None:
    """A tiny SDXL pipeline: CLIP ViT-L-like text_encoder (quick_gelu, pad <|endoftext|>), OpenCLIP
    bigG-like text_encoder_2 (CLIPTextModelWithProjection: gelu, text_projection, pad "!"), a UNet of
    SDXL's structure with head size 16, a VAE with SDXL's scaling factor and force_upcast; saved as a
    diffusers folder; encode_prompt's outputs, the micro-conditioning ids, and whole txt2img runs of
    diffusers' StableDiffusionXLPipeline (computed in f32 on the f16-stored weights)."""
    import shutil
    import diffusers
    from diffusers import AutoencoderKL, StableDiffusionXLPipeline, UNet2DConditionModel
    from transformers import CLIPTextConfig, CLIPTextModel, CLIPTextModelWithProjection, CLIPTokenizer

    # The tiny SD1.x and SD2.x tokenizers (the same 984-entry vocabulary, padded with <|endoftext|> and "!").
    tokenizer = CLIPTokenizer.from_pretrained("tests/fixtures/models/tiny_sd1/tokenizer")
    tokenizer_2 = CLIPTokenizer.from_pretrained("tests/fixtures/models/tiny_sd2/tokenizer")
    assert tokenizer.pad_token == "<|endoftext|>" and tokenizer_2.pad_token == "!"
    common = dict(vocab_size=1000, max_position_embeddings=77, layer_norm_eps=1e-5, bos_token_id=tokenizer.bos_token_id,
                  eos_token_id=tokenizer.eos_token_id)
    torch.manual_seed(71)
    text_encoder = CLIPTextModel(CLIPTextConfig(hidden_size=32, intermediate_size=37, num_hidden_layers=3,
                                                num_attention_heads=4, hidden_act="quick_gelu",
                                                pad_token_id=tokenizer.pad_token_id, **common)).eval()
    perturb_(text_encoder, 72)
    torch.manual_seed(73)
    text_encoder_2 = CLIPTextModelWithProjection(CLIPTextConfig(
        hidden_size=48, intermediate_size=53, num_hidden_layers=3, num_attention_heads=3, hidden_act="gelu",
        projection_dim=24, pad_token_id=tokenizer_2.pad_token_id, **common)).eval()
    perturb_(text_encoder_2, 74)
    torch.manual_seed(75)
    unet = UNet2DConditionModel(
        sample_size=16, in_channels=4, out_channels=4, layers_per_block=2, block_out_channels=(16, 32, 32),
        down_block_types=("DownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D"),
        up_block_types=("CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "UpBlock2D"), attention_head_dim=(1, 2, 2),
        use_linear_projection=True, transformer_layers_per_block=(1, 1, 2), addition_embed_type="text_time",
        addition_time_embed_dim=8, projection_class_embeddings_input_dim=24 + 6 * 8, cross_attention_dim=32 + 48,
        norm_num_groups=8).eval()
    perturb_(unet, 76, scale=0.05)
    unet = f16_rounded_(unet)
    torch.manual_seed(77)
    vae = AutoencoderKL(in_channels=3, out_channels=3, down_block_types=("DownEncoderBlock2D",) * 2,
                        up_block_types=("UpDecoderBlock2D",) * 2, block_out_channels=(32, 64), layers_per_block=1,
                        latent_channels=4, norm_num_groups=16, sample_size=32, scaling_factor=0.13025,
                        force_upcast=True).eval()
    perturb_(vae, 78, scale=0.05)
    vae = f16_rounded_(vae)
    scheduler = diffusers.EulerDiscreteScheduler(**SD_CONFIG)
    pipe = StableDiffusionXLPipeline(vae=vae, text_encoder=text_encoder, text_encoder_2=text_encoder_2,
                                     tokenizer=tokenizer, tokenizer_2=tokenizer_2, unet=unet, scheduler=scheduler,
                                     force_zeros_for_empty_prompt=True, add_watermarker=False)
    pipe.set_progress_bar_config(disable=True)
    folder = out / "models" / "tiny_sdxl_pipeline"
    if folder.exists():
        shutil.rmtree(folder)
    # Stored as SDXL checkpoints are: f16 UNet and VAE, f32 text encoders.
    unet.to(torch.float16); vae.to(torch.float16)
    pipe.save_pretrained(str(folder), safe_serialization=True)
    unet.to(torch.float32); vae.to(torch.float32)

    # Components: what encode_prompt gives for a prompt and for the negative prompt, and the ids.
    tensors = {}
    with torch.no_grad():
        embeds, negative, pooled, negative_pooled = pipe.encode_prompt(
            SDXL_PROMPT, device="cpu", num_images_per_prompt=1, do_classifier_free_guidance=True,
            negative_prompt="blurry, green")
        _, zero_negative, _, zero_negative_pooled = pipe.encode_prompt(
            SDXL_PROMPT, device="cpu", num_images_per_prompt=1, do_classifier_free_guidance=True)
    assert not zero_negative.any() and not zero_negative_pooled.any()
    tensors.update({"prompt_embeds": embeds, "negative_prompt_embeds": negative, "pooled_prompt_embeds": pooled,
                    "negative_pooled_prompt_embeds": negative_pooled})
    for i, (tok, enc) in enumerate([(tokenizer, text_encoder), (tokenizer_2, text_encoder_2)]):
        ids = tok([SDXL_PROMPT, ""], padding="max_length", max_length=77, truncation=True, return_tensors="pt").input_ids
        with torch.no_grad():
            o = enc(ids, output_hidden_states=True)
        tensors[f"encoder{i + 1}.input_ids"] = ids
        tensors[f"encoder{i + 1}.penultimate"] = o.hidden_states[-2]
        tensors[f"encoder{i + 1}.last_hidden_state"] = o.last_hidden_state
        if i == 1:
            tensors["encoder2.text_embeds"] = o.text_embeds
    tensors["add_time_ids"] = pipe._get_add_time_ids((48, 40), (8, 4), (24, 32), dtype=torch.float32,
                                                     text_encoder_projection_dim=24)
    save(tensors, [{"name": "components", "prompt": SDXL_PROMPT, "negative_prompt": "blurry, green",
                    "time_ids_args": {"original_size": [48, 40], "crops_coords_top_left": [8, 4],
                                      "target_size": [24, 32]}}],
         out / "models" / "tiny_sdxl_pipeline_components.safetensors")

    # Whole runs: 24 high, 32 wide (not square), 5 steps, leading spacing as SDXL's scheduler config.
    runs, meta = {}, []
    for name, sampler, schedule, cfg, negative_prompt, micro in SDXL_RUNS:
        pipe.scheduler = make_scheduler(sampler, schedule, "leading", "epsilon")
        negative = {} if negative_prompt is None else {"negative_prompt": negative_prompt}
        record_run(pipe, vae, runs, name, prompt=SDXL_PROMPT, num_inference_steps=5, guidance_scale=cfg, height=24,
                   width=32, generator=torch.Generator("cpu").manual_seed(42), **negative, **micro)
        meta.append({"name": name, "sampler": sampler, "schedule": schedule, "cfg": cfg, "steps": 5, "seed": 42,
                     "prompt": SDXL_PROMPT, "negative_prompt": negative_prompt or "", "width": 32, "height": 24,
                     "spacing": "leading", **{k: list(v) for k, v in micro.items()}})
    for name, sampler, steps in SDXL_TURBO_RUNS:
        pipe.scheduler = make_scheduler(sampler, "discrete", "trailing", "epsilon")
        record_run(pipe, vae, runs, name, prompt=SDXL_PROMPT, num_inference_steps=steps, guidance_scale=0.0, height=24,
                   width=32, generator=torch.Generator("cpu").manual_seed(42))
        meta.append({"name": name, "sampler": sampler, "schedule": "discrete", "cfg": 0.0, "steps": steps, "seed": 42,
                     "prompt": SDXL_PROMPT, "negative_prompt": "", "width": 32, "height": 24, "spacing": "trailing"})
    save(runs, meta, out / "models" / "tiny_sdxl_pipeline_runs.safetensors")

    # img2img with the base model (StableDiffusionXLImg2ImgPipeline: no aesthetic score), from the seeded
    # random image the SD img2img runs use (tests/fixtures/models/img2img_init.png, 24 wide, 32 high).
    from PIL import Image
    img2img = diffusers.StableDiffusionXLImg2ImgPipeline(
        vae=vae, text_encoder=text_encoder, text_encoder_2=text_encoder_2, tokenizer=tokenizer, tokenizer_2=tokenizer_2,
        unet=unet, scheduler=scheduler, requires_aesthetics_score=False, force_zeros_for_empty_prompt=True,
        add_watermarker=False)
    img2img.set_progress_bar_config(disable=True)
    init = Image.open("tests/fixtures/models/img2img_init.png").convert("RGB")
    tensors, meta = {}, []
    for sampler, schedule, strength, negative in [("euler", "discrete", 0.6, "blurry"), ("dpmpp_2m", "karras", 0.8, None),
                                                  ("euler_a", "discrete", 1.0, "blurry")]:
        img2img.scheduler = make_scheduler(sampler, schedule, "leading", "epsilon")
        name = f"{sampler}_{schedule}_s{strength}"
        negative_kwargs = {} if negative is None else {"negative_prompt": negative}
        record_run(img2img, vae, tensors, name, prompt=SDXL_PROMPT, image=init, strength=strength, num_inference_steps=6,
                   guidance_scale=5.0, generator=torch.Generator("cpu").manual_seed(77), **negative_kwargs)
        meta.append({"name": name, "sampler": sampler, "schedule": schedule, "strength": strength, "steps": 6, "cfg": 5.0,
                     "seed": 77, "prompt": SDXL_PROMPT, "negative_prompt": negative or "", "spacing": "leading"})
    save(tensors, meta, out / "models" / "tiny_sdxl_pipeline_img2img.safetensors")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", choices=["sampling", "tokenizer", "models", "img2img", "single_file", "tiled_vae",
                                                       "sdxl", "sdxl_pipeline", "sdxl_refiner", "lora"], default="sampling")
    parser.add_argument("--bpe", type=Path, default=Path(".whl/bpe_simple_vocab_16e6.txt.gz"),
                        help="CLIP's BPE merges, as shipped in the open_clip_torch wheel")
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "tests/fixtures")))
    args = parser.parse_args()
    torch.set_num_threads(1)
    import diffusers

    print(f"torch {torch.__version__}, diffusers {diffusers.__version__}")
    if args.only == "sampling":
        rng_fixtures(args.out)
        scheduler_fixtures(args.out)
    if args.only == "tokenizer":
        tokenizer_fixtures(args.out, args.bpe)
    if args.only == "models":
        model_fixtures(args.out, args.bpe)
    if args.only == "img2img":
        img2img_fixtures(args.out)
    if args.only == "single_file":
        single_file_fixtures(args.out)
    if args.only == "tiled_vae":
        tiled_vae_fixtures(args.out)
    if args.only == "sdxl":
        sdxl_fixtures(args.out)
    if args.only == "sdxl_pipeline":
        sdxl_pipeline_fixtures(args.out)
    if args.only == "sdxl_refiner":
        from sdxl_refiner_fixtures import sdxl_refiner_fixtures
        sdxl_refiner_fixtures(args.out)
    if args.only == "lora":
        from lora_fixtures import lora_fixtures
        lora_fixtures(args.out)


if __name__ == "__main__":
    main()
