#!/usr/bin/env python3
"""Writes a Stable Diffusion 1.x or SDXL single-file (LDM) checkpoint with random weights for the UI
integration runs (tools/integration/comfyui.sh): what a user's .safetensors from a model site looks like,
without downloading one.

The text encoder (CLIP ViT-L/14) and the VAE are SD1.5's at full size, since ComfyUI builds both from
its own fixed configurations whatever the file holds. The UNet has SD1.5's base width (320 channels) and
768-wide context, which is what ComfyUI's model detection recognises as SD1.5, but two levels with one
resnet each instead of four with two, so that a CPU runs a step in a fraction of a second; --full writes
SD1.5's whole UNet. --arch sdxl: SDXL base whole (its UNet, CLIP ViT-L and OpenCLIP ViT-bigG with its
projection, the VAE): ComfyUI recognises SDXL only by its exact structure, so there is no smaller one.
Weights are diffusers' and transformers' own random initialisation from a fixed seed,
stored in float16; names are converted to the single-file form by tools/make_fixtures.py's converter
(checked there against diffusers' from_single_file).

Needs torch, diffusers and transformers (build/venv has them after tools/python/test.sh).
"""
import argparse
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from make_fixtures import to_ldm_single_file  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, type=Path, help="the .safetensors file to write")
    parser.add_argument("--full", action="store_true", help="SD1.5's whole UNet (860M parameters)")
    parser.add_argument("--arch", choices=["sd15", "sdxl"], default="sd15")
    args = parser.parse_args()

    from diffusers import AutoencoderKL, UNet2DConditionModel
    from safetensors.torch import save_file
    from transformers import CLIPTextConfig, CLIPTextModel, CLIPTextModelWithProjection

    torch.manual_seed(20261125)
    sdxl = args.arch == "sdxl"
    if sdxl:
        unet = UNet2DConditionModel(
            sample_size=128, layers_per_block=2, block_out_channels=(320, 640, 1280),
            down_block_types=("DownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D"),
            up_block_types=("CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "UpBlock2D"),
            transformer_layers_per_block=(1, 2, 10), attention_head_dim=(5, 10, 20), cross_attention_dim=2048,
            use_linear_projection=True, addition_embed_type="text_time", addition_time_embed_dim=256,
            projection_class_embeddings_input_dim=2816)
    elif args.full:
        unet = UNet2DConditionModel(cross_attention_dim=768, attention_head_dim=8)
    else:
        unet = UNet2DConditionModel(
            block_out_channels=(320, 640), layers_per_block=1, cross_attention_dim=768, attention_head_dim=8,
            down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"), up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"))
    vae = AutoencoderKL(in_channels=3, out_channels=3, latent_channels=4, block_out_channels=(128, 256, 512, 512),
                        layers_per_block=2, down_block_types=("DownEncoderBlock2D",) * 4,
                        up_block_types=("UpDecoderBlock2D",) * 4, sample_size=512)
    text_encoder = CLIPTextModel(CLIPTextConfig(hidden_size=768, intermediate_size=3072, num_attention_heads=12,
                                                num_hidden_layers=12, projection_dim=768, hidden_act="quick_gelu",
                                                max_position_embeddings=77, vocab_size=49408))
    with tempfile.TemporaryDirectory() as folder:
        if sdxl:
            bigg = CLIPTextModelWithProjection(CLIPTextConfig(
                hidden_size=1280, intermediate_size=5120, num_attention_heads=20, num_hidden_layers=32,
                projection_dim=1280, hidden_act="gelu", max_position_embeddings=77, vocab_size=49408))
            bigg.to(torch.float16).save_pretrained(f"{folder}/text_encoder_2", safe_serialization=True, max_shard_size="50GB")
            del bigg
        unet.to(torch.float16).save_pretrained(f"{folder}/unet", safe_serialization=True, max_shard_size="50GB")
        vae.to(torch.float16).save_pretrained(f"{folder}/vae", safe_serialization=True, max_shard_size="50GB")
        text_encoder.to(torch.float16).save_pretrained(f"{folder}/text_encoder", safe_serialization=True, max_shard_size="50GB")
        state = to_ldm_single_file(Path(folder), "sdxl" if sdxl else "sd1")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    # Written beside, then renamed: the run scripts take an existing file as done, so an interrupted
    # write must leave none.
    partial = args.out.with_name(args.out.name + ".partial")
    save_file(state, str(partial))
    partial.replace(args.out)
    count = sum(v.numel() for v in state.values())
    kind = "SDXL" if sdxl else f"SD1.x ({'whole' if args.full else 'two-level'} UNet)"
    print(f"{args.out}: {len(state)} tensors, {count / 1e6:.0f}M parameters, random {kind}")


if __name__ == "__main__":
    main()
