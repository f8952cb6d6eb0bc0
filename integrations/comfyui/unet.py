"""A ComfyUI SD1.x/2.x/SDXL model's UNet through the engine, on the model's own weights.

EngineUnetFunction is a ComfyUI model function wrapper (ModelPatcher.set_model_unet_function_wrapper):
ComfyUI calls it with its `apply_model` and the step's arguments. Where the engine can compute the call,
it does what ComfyUI's BaseModel._apply_model does around the diffusion model (the model sampling's input
scaling, its timestep, its denoised output) with the engine's UNet in the middle; anything else runs
ComfyUI's own apply_model, counted in hipdiffusion.fallback_report() under "comfyui.unet" with the reason:
ControlNet residuals, transformer patches or wrappers, conditionings the engine has no input for, a model
that is not a 2-D Stable Diffusion UNet, weights cast at run time (low-VRAM loading, manual casting), a
dtype or device without kernels. The wrapper itself is hipdiffusion.model_function's, shared with Forge
(ComfyUI's lineage); this file says what is ComfyUI's.

ComfyUI applies LoRA patches between sampling runs; the engine's model is dropped when sampling ends
(ComfyUI's cleanup callback), so that it holds no weights that ComfyUI has unloaded.
"""

from typing import Optional

from hipdiffusion.model_function import EngineModelFunction


def model_unsupported(base_model) -> Optional[str]:
    """None when the engine can build this ComfyUI model's UNet; else why not."""
    diffusion_model = getattr(base_model, "diffusion_model", None)
    if type(diffusion_model).__name__ != "UNetModel" or not hasattr(diffusion_model, "channel_mult"):
        return f"a {type(diffusion_model).__name__} diffusion model (the engine runs Stable Diffusion's UNetModel)"
    config = getattr(getattr(base_model, "model_config", None), "unet_config", {}) or {}
    if config.get("use_temporal_resblock") or config.get("use_temporal_attention") or config.get("dims", 2) != 2:
        return "a video UNet"
    if config.get("num_classes") not in (None, "sequential"):
        return f"class conditioning {config.get('num_classes')!r}"
    if config.get("disable_self_attentions") is not None or config.get("disable_middle_self_attn"):
        return "a UNet without some self-attentions"
    if getattr(base_model, "manual_cast_dtype", None) is not None:
        return f"weights cast to {base_model.manual_cast_dtype} as the model runs (manual cast)"
    if type(base_model).process_timestep is not _base_process_timestep():
        return f"{type(base_model).__name__}'s own timestep processing"
    return None


def _base_process_timestep():
    import comfy.model_base

    return comfy.model_base.BaseModel.process_timestep


class EngineUnetFunction(EngineModelFunction):
    """The model function wrapper for a ComfyUI model (comfy.model_base.BaseModel)."""

    op = "comfyui.unet"
    ui = "ComfyUI"

    def sampling(self):
        return self.base_model.model_sampling

    def model_unsupported(self) -> Optional[str]:
        return model_unsupported(self.base_model)


def patch(model):
    """A clone of ComfyUI's MODEL (a ModelPatcher) whose UNet runs through the engine."""
    m = model.clone()
    previous = m.model_options.get("model_function_wrapper")
    function = EngineUnetFunction(m.model, previous)
    m.set_model_unet_function_wrapper(function)
    try:
        from comfy.patcher_extension import CallbacksMP

        m.add_callback(CallbacksMP.ON_CLEANUP, function.release)
        function.release_on_cleanup = True
    except (ImportError, AttributeError):
        pass  # an older ComfyUI: the engine's model lives as long as the patched model
    return m
