"""The parameters of a UI's model (ComfyUI, AUTOMATIC1111, Forge) that the engine's models view in place
(not copied): whether they can be viewed, what tells that they changed, the layout the engine needs, and
the configuration the weights do not tell."""

import json
from typing import Optional

import torch

from hipdiffusion.support import placement_unsupported


# Module attributes by which a UI says that a layer casts or patches its weights as it runs: ComfyUI's
# comfy.ops layers (low-VRAM loading, manual casting, per-layer patches) and Forge's backend.operations.
_PER_LAYER_CASTS = ("comfy_cast_weights", "weight_function", "bias_function", "parameters_manual_cast")


def weights_unsupported(model: torch.nn.Module, named: list) -> Optional[str]:
    """None when the engine can view these weights of `model` as they are loaded now; else why not."""
    if not named:
        return "a model without weights"
    for module in model.modules():
        if any(getattr(module, attribute, None) for attribute in _PER_LAYER_CASTS):
            return "weights cast or patched per layer as the model runs (low-VRAM loading)"
    first = named[0][1]
    for _, p in named:
        if p.device != first.device or p.dtype != first.dtype:
            return "parameters on several devices or of several dtypes"
    return placement_unsupported(first.device, first.dtype)


def signature(model: torch.nn.Module, named: list) -> tuple:
    """What changes when the UI changes the weights: the patch set ComfyUI says it applied, each
    parameter's address (a patch or a move replaces the parameter) and, where PyTorch tracks it, its
    version (an in-place patch, as A1111's LoRA makes; tensors made in inference mode, as ComfyUI loads
    them, track none)."""
    return (getattr(model, "current_weight_patches_uuid", None),
            [(p.data_ptr(), -1 if p.is_inference() else p._version) for _, p in named])


def in_engine_layout(named: list) -> None:
    """Convolution kernels into channels_last memory, the engine's [Cout, kh, kw, Cin], in place (once:
    the UI's own convolutions compute the same with them)."""
    with torch.no_grad():
        for _, p in named:
            if p.dim() == 4 and not p.is_contiguous(memory_format=torch.channels_last):
                p.data = p.data.contiguous(memory_format=torch.channels_last)


def group_count(model: torch.nn.Module, default: int = 32) -> int:
    """The GroupNorms' group count, read off the model's own GroupNorm modules (Stable Diffusion's are
    32; the weights do not say)."""
    norm = next((m for m in model.modules() if isinstance(m, torch.nn.GroupNorm)), None)
    return int(norm.num_groups) if norm is not None else default


def ldm_unet_config_json(diffusion_model) -> str:
    """diffusers' config keys that the weights do not tell, from an LDM UNetModel (ComfyUI's, A1111's
    ldm/sgm one, Forge's IntegratedUNet2DConditionModel: the same attributes): the heads per level
    (diffusers' attention_head_dim), the GroupNorms' group count and, for a model with an added
    embedding, SDXL's id width."""
    channels = [diffusion_model.model_channels * m for m in diffusion_model.channel_mult]
    if diffusion_model.num_head_channels == -1:
        heads = [int(diffusion_model.num_heads)] * len(channels)
    else:
        heads = [int(c // diffusion_model.num_head_channels) for c in channels]
    return json.dumps({"attention_head_dim": heads, "addition_time_embed_dim": 256,
                       "norm_num_groups": group_count(diffusion_model)})
