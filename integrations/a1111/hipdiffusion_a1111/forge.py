"""Forge's route: its own UnetPatcher (ComfyUI's lineage), not A1111's hooks, which Forge no longer runs.

Forge builds each generation's UNet from `p.sd_model.forge_objects.unet`, a patcher that extensions
clone, patch and put back in process_before_every_sampling. Two patches:
- whole UNet: a model function wrapper (hipdiffusion.model_function, shared with ComfyUI) doing Forge's
  KModel.apply_model arithmetic (its predictor's input scaling, timestep and denoised output) around the
  engine's UNet; what it does not take runs Forge's own, counted under "forge.unet";
- attention only: an attn1/attn2 replacement in every transformer block (Forge's patches_replace), the
  projected q, k, v in, the attention out; what the kernel does not take runs Forge's attention function,
  counted under "forge.attention".
Where a Forge has neither hook, route_unsupported() says why and nothing is patched.
"""

from typing import Optional

from hipdiffusion import fallback, ops
from hipdiffusion.model_function import EngineModelFunction
from hipdiffusion.support import kernel_unsupported

MODES = ("Off", "Attention", "Whole UNet")
_ATTENTION_OP = "forge.attention"
_SD_UNET = "IntegratedUNet2DConditionModel"  # Forge's class for SD1.x/2.x/SDXL's UNet (backend.nn.unet)
_announced = False  # the first call the kernel computes is printed


class ForgeUnetFunction(EngineModelFunction):
    """The model function wrapper for Forge's KModel (backend.modules.k_model)."""

    op = "forge.unet"
    ui = "Forge"
    announce = staticmethod(print)  # Forge, like A1111, leaves logging at warnings: its own lines are printed

    def sampling(self):
        return self.base_model.predictor

    def model_unsupported(self) -> Optional[str]:
        model = self.base_model.diffusion_model
        if type(model).__name__ != _SD_UNET:
            return f"a {type(model).__name__} diffusion model (the engine runs Stable Diffusion's UNet)"
        config = getattr(model, "config", None) or {}
        if config.get("dims", 2) != 2:
            return "a video UNet"
        if config.get("num_classes") not in (None, "sequential"):
            return f"class conditioning {config.get('num_classes')!r}"
        if config.get("disable_self_attentions") is not None or config.get("disable_middle_self_attn"):
            return "a UNet without some self-attentions"
        storage, computation = getattr(self.base_model, "storage_dtype", None), getattr(self.base_model, "computation_dtype", None)
        if storage != computation:
            return f"weights stored in {storage} and computed in {computation}"
        return None


def attention_patch(q, k, v, extra_options: dict):
    """An attn1/attn2 replacement: q [B, N, heads*D], k and v [B, M, heads*D] -> [B, N, heads*D]."""
    global _announced
    heads = extra_options["n_heads"]
    reason = kernel_unsupported(q, k, v)
    if reason is not None:
        fallback.record(_ATTENTION_OP, reason)
        from backend.attention import attention_function

        return attention_function(q, k, v, heads)
    if not _announced:
        _announced = True
        print(f"hipdiffusion: Forge's attention through the engine's kernel ({q.dtype}, {q.device})")
    return ops.attention(q, k, v, heads)


def route_unsupported(unet_patcher) -> Optional[str]:
    """None when this Forge's UNet patcher has the hooks the two patches use and holds a Stable Diffusion
    UNet (the attention replacement reaches only its transformer blocks); else why not. Whole UNet's
    other conditions (the weights' dtypes, each call's inputs) are checked per call, and fall back."""
    if unet_patcher is None:
        return "no forge_objects.unet (a Forge without its patcher, or A1111)"
    for hook in ("clone", "set_model_unet_function_wrapper", "set_model_replace_all"):
        if not callable(getattr(unet_patcher, hook, None)):
            return f"this Forge's UnetPatcher has no {hook}()"
    model = getattr(getattr(unet_patcher, "model", None), "diffusion_model", None)
    if type(model).__name__ != _SD_UNET:
        return f"a {type(model).__name__} diffusion model (the engine runs Stable Diffusion's UNet)"
    return None


def patch(unet_patcher, mode: str):
    """A clone of Forge's UnetPatcher with `mode` (one of MODES) applied."""
    if mode not in MODES:
        raise ValueError(f"hipDiffusion mode {mode!r}: one of {', '.join(MODES)}")
    unet = unet_patcher.clone()
    if mode == "Whole UNet":
        previous = unet.model_options.get("model_function_wrapper")
        unet.set_model_unet_function_wrapper(ForgeUnetFunction(unet.model, previous))
    elif mode == "Attention":
        unet.set_model_replace_all(attention_patch, "attn1")
        unet.set_model_replace_all(attention_patch, "attn2")
    return unet
