"""make_fixtures.py's "lora" section: LoRA files for the tiny pipelines and what diffusers draws with them.

Needs peft beside diffusers (diffusers' load_lora_weights uses it). Random LoRAs of rank 4, written as
the programs that make them write them:
  - tiny_sd1_lora_kohya.safetensors: kohya's sd-scripts form for SD1.x ("lora_unet_<diffusers module with
    underscores>", "lora_te_text_model_..."), on every linear map and convolution of the UNet's blocks
    (attention projections, proj_in/proj_out as 1x1 convolutions, feed-forward, the resnets' 3x3
    convolutions (LoCon), their time projections, shortcuts, down- and upsamplers) and of the text
    encoder's layers, each with an alpha of rank/2;
  - tiny_sd1_lora_peft.safetensors: diffusers' own (PEFT) form ("unet.<module>.lora_A.weight"), no alpha,
    on the attention projections and the text encoder's;
  - tiny_sd2_lora_kohya.safetensors: the same form for SD2.x (v-prediction, linear projections);
  - tiny_sdxl_lora_kohya.safetensors: sd-scripts' SDXL form, the UNet in the original (LDM) names
    ("lora_unet_input_blocks_4_1_transformer_blocks_0_attn1_to_q"), both text encoders ("lora_te1_",
    "lora_te2_").
Each file is loaded by diffusers' load_lora_weights and fused at a scale (fuse_lora(lora_scale)); every
weight a layer names is checked to have changed (diffusers skips nothing silently here), and a whole
txt2img run is recorded, as make_fixtures.py's "models" runs are (computed in f32 on the f16-stored
weights): tiny_{sd1,sd2,sdxl}_lora_runs.safetensors, each case naming its LoRA file and scale (one SD1.x
case also a UNet scale of its own, fused component by component).
"""
import json
from pathlib import Path

import torch

from make_fixtures import ldm_unet_name, make_scheduler, record_run, save

MODELS = Path("tests/fixtures/models")
PROMPT = "a red circle on a blue background"
RANK = 4


def lora_pair(module: torch.nn.Module, g: torch.Generator, scale: float = 0.15):
    """Random (down, up) for a linear map or a convolution, shaped as kohya stores them: down [r, in] or
    [r, in, kh, kw], up [out, r] or [out, r, 1, 1]."""
    if isinstance(module, torch.nn.Conv2d):
        down = torch.randn(RANK, module.in_channels, *module.kernel_size, generator=g) * scale
        up = torch.randn(module.out_channels, RANK, 1, 1, generator=g) * scale
    else:
        down = torch.randn(RANK, module.in_features, generator=g) * scale
        up = torch.randn(module.out_features, RANK, generator=g) * scale
    return down, up


def layered(model: torch.nn.Module, chosen) -> list:
    """The (name, module) pairs of `model`'s linear maps and convolutions that `chosen(name)` takes."""
    return [(n, m) for n, m in model.named_modules()
            if isinstance(m, (torch.nn.Linear, torch.nn.Conv2d)) and chosen(n)]


def in_blocks(name: str) -> bool:
    return name.startswith(("down_blocks.", "mid_block.", "up_blocks."))


def in_layers(name: str) -> bool:
    return name.startswith(("encoder.layers.", "text_model.encoder.layers."))


def text_model(name: str) -> str:
    """A text encoder module as kohya names it: under transformers 4's "text_model." root, which
    transformers 5's CLIPTextModel no longer has."""
    return name if name.startswith("text_model.") else "text_model." + name


def attention_projection(name: str) -> bool:
    return name.endswith(("to_q", "to_k", "to_v", "to_out.0", "q_proj", "k_proj", "v_proj", "out_proj"))


def kohya_layers(tensors: dict, deltas: dict, prefix: str, modules: list, key_of, g) -> list:
    """Adds each module's kohya layer to `tensors` (alpha rank/2: diffusers 0.42 applies one alpha to a
    whole file, and ignores the layers' own where they differ) and its change at scale 1 to `deltas`;
    returns the modules' names."""
    for name, module in modules:
        down, up = lora_pair(module, g)
        key = prefix + key_of(name).replace(".", "_")
        tensors[f"{key}.lora_down.weight"] = down
        tensors[f"{key}.lora_up.weight"] = up
        tensors[f"{key}.alpha"] = torch.tensor(RANK / 2)
        deltas[(prefix, name)] = (down, up, 0.5)
    return [n for n, _ in modules]


def change(down: torch.Tensor, up: torch.Tensor, scale: float) -> torch.Tensor:
    """What a layer adds to its weight: scale · up · down, shaped as the weight."""
    h = down.half().float().flatten(1)
    u = up.half().float().flatten(1)
    return (scale * u @ h).reshape(up.shape[0], *down.shape[1:])


def write(tensors: dict, path: Path) -> None:
    from safetensors.torch import save_file

    save_file({k: v.to(torch.float16).contiguous() for k, v in tensors.items()}, str(path))


def weights_of(pipe, components: list) -> dict:
    return {c: {k: v.clone() for k, v in getattr(pipe, c).state_dict().items()} for c in components}


def fuse_and_check(pipe, path: Path, scale: float, changed: dict, unet_scale=None) -> None:
    """Loads and fuses the LoRA at `path` (the UNet at `unet_scale` when given, as A1111's <lora:NAME:TE:UNET>,
    each component fused on its own); asserts that exactly the weights of the modules in `changed`
    (component -> {module name: (down, up, layer scale)}) changed, each by its component's scale · layer
    scale · up · down (so that a recording never holds a LoRA that diffusers applied otherwise than kohya's
    programs)."""
    def scale_of(component: str) -> float:
        return unet_scale if component == "unet" and unet_scale is not None else scale

    before = weights_of(pipe, list(changed))
    pipe.load_lora_weights(str(path))
    for component in changed:
        pipe.fuse_lora(components=[component], lora_scale=scale_of(component))
    for component, modules in changed.items():
        after = {k: v for k, v in getattr(pipe, component).state_dict().items() if "lora" not in k}
        after = {k.replace(".base_layer.", "."): v for k, v in after.items()}
        moved = {k[: -len(".weight")] for k, v in after.items() if k in before[component]
                 and not torch.equal(v, before[component][k])}
        assert modules and moved == set(modules), (component, sorted(set(modules) ^ moved)[:8])
        for name, (down, up, layer_scale) in modules.items():
            key = name + ".weight"
            expected = change(down, up, scale_of(component) * layer_scale).reshape(before[component][key].shape)
            torch.testing.assert_close(after[key] - before[component][key], expected, rtol=1e-4, atol=1e-6)


def unfuse(pipe, pristine: dict) -> None:
    """Unfuses and unloads the LoRA, then puts back the weights as they were before it (unfusing subtracts
    what fusing added, which leaves rounding behind: 4e-5 in the "none" run's latents after three)."""
    pipe.unfuse_lora()
    pipe.unload_lora_weights()
    for component, weights in pristine.items():
        getattr(pipe, component).load_state_dict(weights)


def record_lora_runs(pipe, out: Path, loras: list, recording: str, *, seed: int, cfg: float, width: int,
                     height: int) -> None:
    """For each (file, scale, changed[, unet scale]) of `loras` (written already): fused and checked
    (fuse_and_check), a 5-step run recorded under the file's stem (and "_unet_apart" with a UNet scale of
    its own), then unfused; last, the same run without a LoRA ("none"), for the tests' check that each LoRA
    moves the picture. Saved as models/<recording>."""
    settings = dict(prompt=PROMPT, negative_prompt="blurry, green", num_inference_steps=5, guidance_scale=cfg,
                    height=height, width=width)
    runs, meta = {}, []
    pristine = weights_of(pipe, sorted({c for _, _, changed, *_ in loras for c in changed}))
    for file, scale, changed, *apart in loras:
        unet_scale = apart[0] if apart else None
        fuse_and_check(pipe, out / "models" / file, scale, changed, unet_scale)
        name = file.removesuffix(".safetensors") + ("_unet_apart" if apart else "")
        record_run(pipe, pipe.vae, runs, name, generator=torch.Generator("cpu").manual_seed(seed), **settings)
        meta.append({"name": name, "lora": file, "lora_scale": scale, "sampler": "euler", "schedule": "discrete",
                     "cfg": cfg, "steps": 5, "seed": seed, "prompt": PROMPT, "negative_prompt": "blurry, green",
                     "width": width, "height": height, "spacing": "leading"}
                    | ({"lora_unet_scale": unet_scale} if apart else {}))
        unfuse(pipe, pristine)
    record_run(pipe, pipe.vae, runs, "none", generator=torch.Generator("cpu").manual_seed(seed), **settings)
    save(runs, meta, out / "models" / recording)


def sd1_lora_runs(out: Path, g: torch.Generator) -> None:
    from diffusers import StableDiffusionPipeline

    pipe = StableDiffusionPipeline.from_pretrained(str(MODELS / "tiny_sd1"), torch_dtype=torch.float32,
                                                   safety_checker=None)
    pipe.scheduler = make_scheduler("euler", "discrete", "leading", "epsilon")
    pipe.set_progress_bar_config(disable=True)
    unet_modules = layered(pipe.unet, in_blocks)
    te_modules = layered(pipe.text_encoder, in_layers)
    kohya, deltas = {}, {}
    kohya_layers(kohya, deltas, "lora_unet_", unet_modules, lambda n: n, g)
    kohya_layers(kohya, deltas, "lora_te_", te_modules, text_model, g)
    changed = {"unet": {n: deltas[("lora_unet_", n)] for n, _ in unet_modules},
               "text_encoder": {n: deltas[("lora_te_", n)] for n, _ in te_modules}}
    peft = {}
    peft_changed = {"unet": {}, "text_encoder": {}}
    for component, modules in (("unet", unet_modules), ("text_encoder", te_modules)):
        for name, module in modules:
            if not attention_projection(name):
                continue
            down, up = lora_pair(module, g)
            key = f"{component}.{name if component == 'unet' else text_model(name)}"
            peft[f"{key}.lora_A.weight"] = down
            peft[f"{key}.lora_B.weight"] = up
            peft_changed[component][name] = (down, up, 1.0)

    write(kohya, out / "models" / "tiny_sd1_lora_kohya.safetensors")
    write(peft, out / "models" / "tiny_sd1_lora_peft.safetensors")
    record_lora_runs(pipe, out, [("tiny_sd1_lora_kohya.safetensors", 0.7, changed),
                                 ("tiny_sd1_lora_peft.safetensors", 1.0, peft_changed),
                                 ("tiny_sd1_lora_kohya.safetensors", 1.2, changed, 0.3)],
                     "tiny_sd1_lora_runs.safetensors", seed=42, cfg=7.5, width=32, height=32)


def sdxl_lora_runs(out: Path, g: torch.Generator) -> None:
    from diffusers import StableDiffusionXLPipeline

    folder = MODELS / "tiny_sdxl_pipeline"
    pipe = StableDiffusionXLPipeline.from_pretrained(str(folder), torch_dtype=torch.float32)
    pipe.scheduler = make_scheduler("euler", "discrete", "leading", "epsilon")
    pipe.set_progress_bar_config(disable=True)
    config = json.loads((folder / "unet" / "config.json").read_text())
    attn_levels = [t.startswith("CrossAttn") for t in config["up_block_types"]]

    def ldm(name: str) -> str:
        return ldm_unet_name(name + ".weight", config["layers_per_block"], attn_levels).removesuffix(".weight")

    tensors, deltas, changed = {}, {}, {}
    for component, prefix, modules, key_of in (
            ("unet", "lora_unet_", layered(pipe.unet, in_blocks), ldm),
            ("text_encoder", "lora_te1_", layered(pipe.text_encoder, in_layers), text_model),
            ("text_encoder_2", "lora_te2_", layered(pipe.text_encoder_2, in_layers), text_model)):
        kohya_layers(tensors, deltas, prefix, modules, key_of, g)
        changed[component] = {n: deltas[(prefix, n)] for n, _ in modules}
    file = "tiny_sdxl_lora_kohya.safetensors"
    write(tensors, out / "models" / file)
    record_lora_runs(pipe, out, [(file, 0.8, changed)], "tiny_sdxl_lora_runs.safetensors", seed=77, cfg=6.0,
                     width=32, height=24)


def sd2_lora_runs(out: Path, g: torch.Generator) -> None:
    """SD2.x's tiny pipeline (linear projections, v-prediction): kohya's form on the UNet's blocks and the
    text encoder, which its single file holds in OpenCLIP's names (fused q/k/v rows)."""
    from diffusers import StableDiffusionPipeline

    pipe = StableDiffusionPipeline.from_pretrained(str(MODELS / "tiny_sd2"), torch_dtype=torch.float32,
                                                   safety_checker=None)
    pipe.scheduler = make_scheduler("euler", "discrete", "leading", "v_prediction")
    pipe.set_progress_bar_config(disable=True)
    unet_modules = layered(pipe.unet, in_blocks)
    te_modules = layered(pipe.text_encoder, in_layers)
    tensors, deltas = {}, {}
    kohya_layers(tensors, deltas, "lora_unet_", unet_modules, lambda n: n, g)
    kohya_layers(tensors, deltas, "lora_te_", te_modules, text_model, g)
    changed = {"unet": {n: deltas[("lora_unet_", n)] for n, _ in unet_modules},
               "text_encoder": {n: deltas[("lora_te_", n)] for n, _ in te_modules}}
    file = "tiny_sd2_lora_kohya.safetensors"
    write(tensors, out / "models" / file)
    record_lora_runs(pipe, out, [(file, 0.9, changed)], "tiny_sd2_lora_runs.safetensors", seed=43, cfg=7.5,
                     width=32, height=32)


def lora_fixtures(out: Path) -> None:
    g = torch.Generator("cpu").manual_seed(91)
    sd1_lora_runs(out, g)
    sdxl_lora_runs(out, g)
    sd2_lora_runs(out, g)  # last: the files before it keep their random numbers
