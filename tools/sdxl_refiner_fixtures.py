"""make_fixtures.py's "sdxl_refiner" section: a tiny SDXL refiner and what diffusers computes with it.

The refiner is built as stabilityai/stable-diffusion-xl-refiner-1.0 is: the second text encoder only
(the tiny base's own OpenCLIP-like text_encoder_2 and tokenizer_2, as the real refiner shares the base's
ViT-bigG), a VAE of the base's latent space and configuration (4 channels, SDXL's scaling factor, 2x, the
base's GroupNorm groups; narrower than the base's and with its own weights, to keep the fixture small:
the refiner encodes and decodes with its own),
and a UNet whose first and last levels have no attention, cross-attending to encoder 2's hidden states
alone, with five micro-conditioning ids (original size, crop top-left and the aesthetic score) after the
pooled embedding. model_index.json says requires_aesthetics_score and, as the
real refiner's, force_zeros_for_empty_prompt false. Saved as a diffusers folder and as a single file
(conditioner.embedders.0.model.*, diffusers' refiner layout), verified with diffusers' from_single_file;
its VAE also alone in the original names (tiny_sdxl_refiner_vae.safetensors, for --vae).

Recorded (computed in f32 on the f16-stored weights):
  - StableDiffusionXLImg2ImgPipeline runs of the refiner alone on the img2img init image: samplers,
    strengths, CFG on and off, default and given aesthetic scores and size conditioning;
  - "ensemble of expert denoisers" runs: the base (StableDiffusionXLPipeline with denoising_end, latents
    out) then the refiner (denoising_start, on those latents), one generator passed to both calls.
"""
import json
import shutil
from pathlib import Path

import torch

from make_fixtures import f16_rounded_, make_scheduler, perturb_, save, to_ldm_single_file

BASE = Path("tests/fixtures/models/tiny_sdxl_pipeline")
PROMPT = "a red circle on a blue background"

# (name, sampler, schedule, strength, steps, cfg, negative prompt, extra pipeline arguments)
REFINER_RUNS = [
    ("euler_discrete_s0.3", "euler", "discrete", 0.3, 10, 5.0, "", {}),
    ("dpmpp_2m_karras_s0.6_scores", "dpmpp_2m", "karras", 0.6, 6, 5.0, "blurry",
     dict(aesthetic_score=7.5, negative_aesthetic_score=1.5, original_size=(64, 48), crops_coords_top_left=(4, 8),
          negative_original_size=(32, 40), negative_crops_coords_top_left=(2, 6))),
    ("euler_a_discrete_s0.5_cfg1", "euler_a", "discrete", 0.5, 6, 1.0, "", {}),
    ("ddim_discrete_s0.7", "ddim", "discrete", 0.7, 6, 5.0, "blurry", dict(negative_aesthetic_score=3.0)),
]
# (name, sampler, schedule, steps, high_noise_frac)
ENSEMBLE_RUNS = [
    ("euler_discrete_f0.8", "euler", "discrete", 10, 0.8),
    ("dpmpp_2m_karras_f0.7", "dpmpp_2m", "karras", 8, 0.7),
    ("euler_a_discrete_f0.75", "euler_a", "discrete", 10, 0.75),
    ("ddim_discrete_f0.8", "ddim", "discrete", 10, 0.8),
]


def refiner_ldm_single_file(folder: Path) -> dict:
    """The refiner's weights under single-file names: the UNet and VAE as the base's converter writes
    them, OpenCLIP's names for the one text encoder under conditioner.embedders.0.model."""
    from make_fixtures import open_clip_names
    from safetensors.torch import load_file

    # The base converter reads text_encoder/ for SD and SDXL's first embedder; the refiner has none, so
    # its UNet and VAE are taken from it and the embedder written here.
    staged = folder.parent / (folder.name + "_staging")
    shutil.copytree(folder, staged, dirs_exist_ok=True)
    shutil.copytree(folder / "text_encoder_2", staged / "text_encoder", dirs_exist_ok=True)
    try:
        out = {k: v for k, v in to_ldm_single_file(staged, "sdxl").items() if not k.startswith("conditioner.")}
    finally:
        shutil.rmtree(staged)
    te2 = load_file(str(folder / "text_encoder_2" / "model.safetensors"))
    out.update(open_clip_names(te2, "conditioner.embedders.0.model.", False, torch.Generator("cpu").manual_seed(62)))
    return {k: v.contiguous() for k, v in out.items()}


def record(pipe, vae, tensors: dict, name: str, **kwargs) -> torch.Tensor:
    with torch.no_grad():
        lat = pipe(output_type="latent", **kwargs).images
        tensors[f"{name}.latents"] = lat
        tensors[f"{name}.image"] = (vae.decode(lat / vae.config.scaling_factor).sample / 2 + 0.5).clamp(0, 1)
    return lat


def sdxl_refiner_fixtures(out: Path) -> None:
    import diffusers
    from diffusers import AutoencoderKL, UNet2DConditionModel
    from PIL import Image
    from safetensors.torch import save_file
    from transformers import CLIPTextModelWithProjection, CLIPTokenizer

    base = diffusers.StableDiffusionXLPipeline.from_pretrained(str(BASE), torch_dtype=torch.float32)
    base.set_progress_bar_config(disable=True)
    text_encoder_2 = CLIPTextModelWithProjection.from_pretrained(str(BASE / "text_encoder_2")).eval()
    tokenizer_2 = CLIPTokenizer.from_pretrained(str(BASE / "tokenizer_2"))
    base_vae = base.vae.config
    torch.manual_seed(79)
    vae = AutoencoderKL(in_channels=3, out_channels=3, down_block_types=("DownEncoderBlock2D",) * 2,
                        up_block_types=("UpDecoderBlock2D",) * 2, block_out_channels=(16, 32), layers_per_block=1,
                        latent_channels=base_vae.latent_channels, norm_num_groups=base_vae.norm_num_groups,
                        sample_size=base_vae.sample_size,
                        scaling_factor=base_vae.scaling_factor, force_upcast=True).eval()
    perturb_(vae, 80, scale=0.05)
    vae = f16_rounded_(vae)
    width = text_encoder_2.config.hidden_size
    projection = text_encoder_2.config.projection_dim
    torch.manual_seed(81)
    # Three levels (the latents of the 24x32 init image are 12x16), the last plain as the refiner's:
    # head size 16, one transformer block at level 1, two in the middle block (its depth is the last
    # entry's, as diffusers builds it).
    unet = UNet2DConditionModel(
        sample_size=16, in_channels=4, out_channels=4, layers_per_block=2, block_out_channels=(16, 32, 32),
        down_block_types=("DownBlock2D", "CrossAttnDownBlock2D", "DownBlock2D"),
        up_block_types=("UpBlock2D", "CrossAttnUpBlock2D", "UpBlock2D"), attention_head_dim=(1, 2, 2),
        use_linear_projection=True, transformer_layers_per_block=(1, 1, 2), addition_embed_type="text_time",
        addition_time_embed_dim=8, projection_class_embeddings_input_dim=projection + 5 * 8, cross_attention_dim=width,
        norm_num_groups=8).eval()
    perturb_(unet, 82, scale=0.05)
    unet = f16_rounded_(unet)
    refiner = diffusers.StableDiffusionXLImg2ImgPipeline(
        vae=vae, text_encoder=None, text_encoder_2=text_encoder_2, tokenizer=None, tokenizer_2=tokenizer_2, unet=unet,
        scheduler=diffusers.EulerDiscreteScheduler.from_pretrained(str(BASE / "scheduler")),
        requires_aesthetics_score=True, force_zeros_for_empty_prompt=False, add_watermarker=False)
    refiner.set_progress_bar_config(disable=True)
    folder = out / "models" / "tiny_sdxl_refiner"
    if folder.exists():
        shutil.rmtree(folder)
    unet.to(torch.float16); vae.to(torch.float16)
    refiner.save_pretrained(str(folder), safe_serialization=True)
    unet.to(torch.float32); vae.to(torch.float32)
    assert json.loads((folder / "model_index.json").read_text())["requires_aesthetics_score"] is True

    # The single file, checked by diffusers' own converter.
    path = out / "models" / "tiny_sdxl_refiner.safetensors"
    state = refiner_ldm_single_file(folder)
    save_file(state, str(path))
    single = diffusers.StableDiffusionXLImg2ImgPipeline.from_single_file(
        str(path), config=str(folder), torch_dtype=torch.float32, local_files_only=True)
    for component in ["unet", "vae", "text_encoder_2"]:
        a = {k: v for k, v in getattr(refiner, component).state_dict().items() if "position_ids" not in k}
        b = {k: v for k, v in getattr(single, component).state_dict().items() if "position_ids" not in k}
        assert a.keys() == b.keys(), (component, sorted(set(a) ^ set(b))[:5])
        for k in a:
            assert torch.equal(a[k], b[k].to(a[k].dtype)), (component, k)
    assert single.text_encoder is None
    print(f"{path}: {len(state)} tensors, read back by diffusers' from_single_file identically")

    # The refiner's VAE alone in the original names, as VAE files are shared (stabilityai's
    # sdxl_vae.safetensors): for --vae, checked by diffusers' AutoencoderKL.from_single_file.
    vae_path = out / "models" / "tiny_sdxl_refiner_vae.safetensors"
    prefix = "first_stage_model."
    save_file({k[len(prefix):]: v for k, v in state.items() if k.startswith(prefix)}, str(vae_path))
    lone = AutoencoderKL.from_single_file(str(vae_path), config=str(folder / "vae"), torch_dtype=torch.float32)
    a, b = vae.state_dict(), lone.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), "the lone VAE file differs"
    print(f"{vae_path}: read back by diffusers' AutoencoderKL.from_single_file identically")

    init = Image.open("tests/fixtures/models/img2img_init.png").convert("RGB")  # 24 wide, 32 high
    tensors, meta = {}, []
    for name, sampler, schedule, strength, steps, cfg, negative, extra in REFINER_RUNS:
        refiner.scheduler = make_scheduler(sampler, schedule, "leading", "epsilon")
        record(refiner, vae, tensors, name, prompt=PROMPT, negative_prompt=negative, image=init, strength=strength,
               num_inference_steps=steps, guidance_scale=cfg, generator=torch.Generator("cpu").manual_seed(91), **extra)
        meta.append({"name": name, "kind": "refiner", "sampler": sampler, "schedule": schedule, "strength": strength,
                     "steps": steps, "cfg": cfg, "seed": 91, "prompt": PROMPT, "negative_prompt": negative,
                     "spacing": "leading", "width": 24, "height": 32,
                     **{k: list(v) if isinstance(v, tuple) else v for k, v in extra.items()}})
    for name, sampler, schedule, steps, frac in ENSEMBLE_RUNS:
        base.scheduler = make_scheduler(sampler, schedule, "leading", "epsilon")
        refiner.scheduler = make_scheduler(sampler, schedule, "leading", "epsilon")
        generator = torch.Generator("cpu").manual_seed(93)  # one generator through both experts
        common = dict(prompt=PROMPT, negative_prompt="blurry, green", num_inference_steps=steps, guidance_scale=5.0,
                      generator=generator)
        with torch.no_grad():
            handed = base(output_type="latent", height=24, width=32, denoising_end=frac, **common).images
        tensors[f"{name}.base_latents"] = handed
        record(refiner, vae, tensors, name, image=handed, denoising_start=frac, **common)
        meta.append({"name": name, "kind": "ensemble", "sampler": sampler, "schedule": schedule, "steps": steps,
                     "high_noise_frac": frac, "cfg": 5.0, "seed": 93, "prompt": PROMPT,
                     "negative_prompt": "blurry, green", "spacing": "leading", "width": 32, "height": 24})
    save(tensors, meta, out / "models" / "tiny_sdxl_refiner_runs.safetensors")
