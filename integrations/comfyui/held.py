"""The parameters of a ComfyUI model that the engine's models view in place (not copied)."""

from typing import Optional

import torch

from hipdiffusion.support import placement_unsupported


def weights_unsupported(model: torch.nn.Module, named: list) -> Optional[str]:
    """None when the engine can view these weights of `model` as they are loaded now; else why not."""
    if not named:
        return "a model without weights"
    for module in model.modules():  # ComfyUI's low-VRAM loading casts or patches per layer (comfy.ops)
        if getattr(module, "comfy_cast_weights", False) or getattr(module, "weight_function", None) or \
                getattr(module, "bias_function", None):
            return "weights cast or patched per layer as the model runs (low-VRAM loading)"
    first = named[0][1]
    for _, p in named:
        if p.device != first.device or p.dtype != first.dtype:
            return "parameters on several devices or of several dtypes"
    return placement_unsupported(first.device, first.dtype)


def signature(model: torch.nn.Module, named: list) -> tuple:
    """What changes when ComfyUI changes the weights: the patch set ComfyUI says it applied, each
    parameter's address (a patch or a move replaces the parameter) and, where PyTorch tracks it, its
    version (an in-place patch; tensors made in inference mode, as ComfyUI loads them, track none)."""
    return (getattr(model, "current_weight_patches_uuid", None),
            [(p.data_ptr(), -1 if p.is_inference() else p._version) for _, p in named])


def in_engine_layout(named: list) -> None:
    """Convolution kernels into channels_last memory, the engine's [Cout, kh, kw, Cin], in place (once:
    ComfyUI's own convolutions compute the same with them)."""
    with torch.no_grad():
        for _, p in named:
            if p.dim() == 4 and not p.is_contiguous(memory_format=torch.channels_last):
                p.data = p.data.contiguous(memory_format=torch.channels_last)


def group_count(model: torch.nn.Module, default: int = 32) -> int:
    """The GroupNorms' group count, read off the model's own GroupNorm modules (Stable Diffusion's are
    32; the weights do not say)."""
    norm = next((m for m in model.modules() if isinstance(m, torch.nn.GroupNorm)), None)
    return int(norm.num_groups) if norm is not None else default
