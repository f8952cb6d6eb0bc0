"""A ComfyUI SD1.x/2.x/SDXL model's UNet through the engine, on the model's own weights.

EngineUnetFunction is a ComfyUI model function wrapper (ModelPatcher.set_model_unet_function_wrapper):
ComfyUI calls it with its `apply_model` and the step's arguments. Where the engine can compute the call,
it does what ComfyUI's BaseModel._apply_model does around the diffusion model (the model sampling's input
scaling, its timestep, its denoised output) with the engine's UNet in the middle; anything else runs
ComfyUI's own apply_model, counted in hipdiffusion.fallback_report() under "comfyui.unet" with the reason:
ControlNet residuals, transformer patches or wrappers, conditionings the engine has no input for, a model
that is not a 2-D Stable Diffusion UNet, weights cast at run time (low-VRAM loading, manual casting), a
dtype or device without kernels.

The engine's UNet views the model's parameters (nothing copied); its convolution kernels must be in
channels_last memory, so those parameters are converted in place the first time (ComfyUI's own
convolutions compute the same with them). Weights that ComfyUI changes are noticed by ComfyUI's patch id,
the parameters' addresses and their version counters, and the engine's model is made again over them:
at the next call for a move or an in-place change, at the next sampling run for replaced parameters
(ComfyUI applies LoRA patches between runs). The engine's model is dropped when sampling ends
(ComfyUI's cleanup callback), so that it holds no weights that ComfyUI has unloaded.
"""

import json
import logging
from typing import Optional

import torch

from hipdiffusion import fallback
from hipdiffusion.engine import EngineUnet

from . import held

_OP = "comfyui.unet"
_log = logging.getLogger("hipdiffusion")
# What ComfyUI may pass in `c` that the engine takes (anything else falls back).
_KNOWN_CONDITIONINGS = {"c_crossattn", "c_concat", "control", "transformer_options", "y"}
# transformer_options entries that change what the diffusion model computes.
_PATCHING_OPTIONS = ("patches", "patches_replace", "wrappers")


def config_json(diffusion_model) -> str:
    """diffusers' config keys that the weights do not tell, from ComfyUI's UNetModel: the heads per level
    (diffusers' attention_head_dim), the GroupNorms' group count and, for a model with an added
    embedding, SDXL's id width."""
    channels = [diffusion_model.model_channels * m for m in diffusion_model.channel_mult]
    if diffusion_model.num_head_channels == -1:
        heads = [int(diffusion_model.num_heads)] * len(channels)
    else:
        heads = [int(c // diffusion_model.num_head_channels) for c in channels]
    return json.dumps({"attention_head_dim": heads, "addition_time_embed_dim": 256,
                       "norm_num_groups": held.group_count(diffusion_model)})


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


class EngineUnetFunction:
    """The model function wrapper. One per patched model; its clones share it (and its engine model).

    Per call only the call's own inputs are checked and the weights' signature (held.signature) taken;
    the weights are checked and the engine's model built when that signature changes. Where ComfyUI
    calls release() after each sampling run (patch() registers it), the model's parameter list is walked
    once per run, else at every call (a walk costs about a millisecond on SD1.5's UNet)."""

    def __init__(self, base_model, previous=None):
        self.base_model = base_model
        self.previous = previous  # a wrapper the model had already: it gets our apply_model as its own
        self.release_on_cleanup = False
        self.calls = 0  # calls the engine computed
        self.release()

    def __deepcopy__(self, memo):  # ModelPatcher.clone deep-copies model_options
        return self

    def __call__(self, apply_model, args):
        if self.previous is not None:
            return self.previous(self.apply_model, args)
        return self.apply_model(args["input"], args["timestep"], **args["c"])

    def release(self, *args) -> None:
        """Drops the engine's model and what was decided about the weights (ComfyUI's cleanup after
        sampling): nothing of ComfyUI's weights is kept alive past a run; the next call starts afresh."""
        self._parameters = None  # (name, parameter) pairs of the diffusion model
        self._signature = None  # of the weights the two below were decided on
        self._engine: Optional[EngineUnet] = None
        self._refusal: Optional[str] = None  # why no engine model over those weights

    def call_unsupported(self, c: dict) -> Optional[str]:
        """None when the engine takes this call's conditioning and options; else why not."""
        unknown = sorted(set(c) - _KNOWN_CONDITIONINGS)
        if unknown:
            return "conditionings the engine has no input for: " + ", ".join(unknown)
        if c.get("control") is not None:
            return "ControlNet residuals"
        options = c.get("transformer_options") or {}
        for key in _PATCHING_OPTIONS:
            if options.get(key):
                return f"transformer_options['{key}'] (patches the diffusion model)"
        if c.get("c_crossattn") is None:
            return "no cross-attention context"
        return model_unsupported(self.base_model)

    def _weights(self, device: torch.device):
        """(the engine's model over the current weights, None) or (None, why there is none)."""
        if self._parameters is None or not self.release_on_cleanup:
            self._parameters = list(self.base_model.diffusion_model.named_parameters())
        named = self._parameters
        if held.signature(self.base_model, named) != self._signature:
            self._engine, self._refusal = None, held.weights_unsupported(self.base_model.diffusion_model, named)
            if self._refusal is None:
                try:
                    self._engine = self._build(named)
                except (ValueError, RuntimeError) as e:  # the engine refused these weights: say why
                    self._refusal = f"the engine could not build this UNet: {e}"
            self._signature = held.signature(self.base_model, named)  # after the layout change
        if self._engine is not None and named[0][1].device != device:
            return None, "an input on another device than the weights"
        return self._engine, self._refusal

    def _build(self, named: list) -> EngineUnet:
        held.in_engine_layout(named)
        tensors = [p.detach() for _, p in named]
        engine = EngineUnet.from_weights([name for name, _ in named], tensors,
                                         config_json(self.base_model.diffusion_model), ldm_names=True)
        _log.info("hipdiffusion: ComfyUI's UNet through the engine (%d tensors held, %s on %s)", len(named),
                  engine.dtype, tensors[0].device)
        return engine

    def apply_model(self, x: torch.Tensor, t: torch.Tensor, **c) -> torch.Tensor:
        """ComfyUI's BaseModel.apply_model(x, sigma, **c), through the engine where it can."""
        engine, reason = None, self.call_unsupported(c)
        if reason is None:
            engine, reason = self._weights(x.device)
        if reason is not None:
            fallback.record(_OP, reason)
            return self.base_model.apply_model(x, t, **c)
        sampling = self.base_model.model_sampling
        sigma = t
        xc = sampling.calculate_input(sigma, x)
        if c.get("c_concat") is not None:  # inpainting models: the mask and masked image as extra channels
            xc = torch.cat([xc, c["c_concat"].to(xc.device, xc.dtype)], dim=1)
        timesteps = sampling.timestep(sigma).float()
        context = c["c_crossattn"].to(x.device, engine.dtype)
        y = c.get("y")
        y = y.to(x.device, engine.dtype) if y is not None else None
        with torch.no_grad():
            output = engine(xc.to(engine.dtype), timesteps, context, text_embeds=y)
        self.calls += 1
        return sampling.calculate_denoised(sigma, output.float(), x)


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
