"""The nodes, described once: what nodes_v1.py (ComfyUI's original node classes) and nodes_v3.py (its
V3 API) both build their classes from."""

from dataclasses import dataclass
from typing import Callable

from . import attention, unet, vae

CATEGORY = "hipdiffusion"


def patch_attention(model):
    m = model.clone()
    m.model_options.setdefault("transformer_options", {})["optimized_attention_override"] = attention.override
    return m


def decode(samples: dict, vae_model):
    return vae.decode(vae_model, samples["samples"])


def encode(pixels, vae_model):
    return {"samples": vae.encode(vae_model, pixels)}


@dataclass(frozen=True)
class Node:
    node_id: str
    display_name: str
    description: str
    inputs: tuple  # (name, ComfyUI type) in the order `run` takes them
    output: str  # ComfyUI type
    run: Callable


NODES = (
    Node("HipDiffusionAttention", "hipDiffusion Attention",
         "The model's attention through hipDiffusion's kernel (ComfyUI's attention override on a clone of the "
         "model); calls the kernel does not take (masks, dtypes or devices without kernels) run the attention "
         "ComfyUI would have run.", (("model", "MODEL"),), "MODEL", patch_attention),
    Node("HipDiffusionUNet", "hipDiffusion UNet",
         "The model's whole UNet (SD1.x, SD2.x, SDXL) through hipDiffusion's engine, on the model's own weights "
         "(LoRAs applied by ComfyUI included); on a GPU as a captured graph per shape. Steps it cannot compute "
         "(ControlNet, model patches, low-VRAM loading) run ComfyUI's own UNet.",
         (("model", "MODEL"),), "MODEL", unet.patch),
    Node("HipDiffusionVAEDecode", "hipDiffusion VAE Decode",
         "Decodes latents with hipDiffusion's engine: whole, or where that does not fit in device memory, in "
         "exact tiles that give the whole decode's picture (no seams). Other VAEs run ComfyUI's decode.",
         (("samples", "LATENT"), ("vae", "VAE")), "IMAGE", decode),
    Node("HipDiffusionVAEEncode", "hipDiffusion VAE Encode",
         "Encodes an image with hipDiffusion's engine (the latent distribution's mean, as ComfyUI's).",
         (("pixels", "IMAGE"), ("vae", "VAE")), "LATENT", encode),
)
