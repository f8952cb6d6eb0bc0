"""The engine's whole UNet and VAE on a diffusers model's own weights.

`EngineUnet(unet)` and `EngineVae(vae)` hold torch.classes.hipdiffusion.Unet / .Vae (python/csrc/
engine_models.cpp): the engine's models built over the module's parameters, shared rather than copied
(a convolution kernel must be in channels_last memory, which is the engine's [Cout, kh, kw, Cin]). On a
GPU the UNet runs as the engine's captured graph per input shape (the first call of a shape tunes the
kernels, the second captures, later ones replay), on the engine's own stream joined to PyTorch's current
one at both ends. They take and give diffusers' NCHW tensors.

The weights are read where they are when the object is made: parameters replaced afterwards (a LoRA
fused later, the model moved or cast) are not seen; make a new object then.
"""

import json
from typing import Optional, Tuple

import torch

from . import _library  # noqa: F401  (loads torch.ops.hipdiffusion and torch.classes.hipdiffusion)
from .support import placement_unsupported


def _config_json(module: torch.nn.Module) -> str:
    config = {k: v for k, v in dict(module.config).items() if not k.startswith("_")}
    return json.dumps(config, default=lambda v: list(v) if isinstance(v, (tuple, set)) else str(v))


def _held(module: torch.nn.Module, dtype: Optional[torch.dtype] = None) -> Tuple[list, list]:
    """The module's weights by diffusers' names, converted to `dtype` only when one is given (a copy)."""
    names, tensors = [], []
    for name, t in module.state_dict().items():
        names.append(name)
        tensors.append(t if dtype is None or t.dtype == dtype else t.to(dtype))
    return names, tensors


def _timesteps(timestep, n: int, device: torch.device) -> torch.Tensor:
    """diffusers' timestep argument (a number, a 0-d or an [n] tensor) as float32 [n] on `device`."""
    t = torch.as_tensor(timestep, device=device).to(torch.float32).reshape(-1)
    return t.expand(n).contiguous() if t.numel() == 1 else t.contiguous()


def _nhwc(x: torch.Tensor) -> torch.Tensor:
    return x.permute(0, 2, 3, 1).contiguous()  # no copy for a channels_last tensor


class _HeldModel:
    """An engine model over weights it holds by reference: `module` (a torch.classes.hipdiffusion class,
    _CLASS) and `dtype` (the one its weights, and so its inputs, are in)."""

    _WHAT = ""
    _CLASS = ""

    @classmethod
    def from_weights(cls, names: list, tensors: list, config_json: str, ldm_names: bool):
        """Over a model's weights by name: diffusers' names, or with `ldm_names` the original (LDM) ones
        that ComfyUI's models keep. config_json: diffusers' config keys where the weights do not tell
        (heads per level, GroupNorm groups); convolution kernels in channels_last memory."""
        engine = cls.__new__(cls)
        engine._hold(names, tensors, config_json, ldm_names)
        return engine

    def _hold(self, names: list, tensors: list, config_json: str, ldm_names: bool) -> None:
        if not tensors:
            raise ValueError(f"hipdiffusion engine {self._WHAT}: no weights")
        problem = placement_unsupported(tensors[0].device, tensors[0].dtype)
        if problem is not None:
            raise ValueError(f"hipdiffusion engine {self._WHAT}: {problem}")
        self.dtype = tensors[0].dtype
        self.module = getattr(torch.classes.hipdiffusion, self._CLASS)(names, tensors, config_json, ldm_names)


class EngineUnet(_HeldModel):
    """A diffusers UNet2DConditionModel (SD1.x/2.x/SDXL) through the engine."""

    _WHAT, _CLASS = "UNet", "Unet"

    def __init__(self, unet: torch.nn.Module):
        names, tensors = _held(unet)
        self._hold(names, tensors, _config_json(unet), ldm_names=False)

    def __call__(self, sample: torch.Tensor, timestep, context: torch.Tensor,
                 text_embeds: Optional[torch.Tensor] = None, time_ids: Optional[torch.Tensor] = None) -> torch.Tensor:
        """sample [N, C, h, w] and context [N, L, D] in the model's dtype -> prediction [N, C', h, w]
        (channels_last memory). SDXL: the pooled text_embeds [N, P] and time_ids [N, k], or text_embeds
        alone as add_embedding's whole input, already joined (the original UNet's `y`)."""
        n = sample.shape[0]
        if text_embeds is not None:
            text_embeds = text_embeds.to(self.dtype).contiguous()
        if time_ids is not None:
            time_ids = time_ids.to(torch.float32).reshape(n, -1).contiguous()
        out = self.module.forward(_nhwc(sample), _timesteps(timestep, n, sample.device), context.contiguous(),
                                  text_embeds, time_ids)
        return out.permute(0, 3, 1, 2)

    def captured_count(self) -> int:
        return self.module.captured_count()


class EngineVae(_HeldModel):
    """A diffusers AutoencoderKL through the engine. With `upcast` (where diffusers would run a float16
    VAE in float32: SDXL's pipelines, for a VAE whose config says force_upcast), it computes in bfloat16
    instead, on a bfloat16 copy of its weights: float32's range at half the memory, and the GPU kernels'
    dtype."""

    _WHAT, _CLASS = "VAE", "Vae"

    def __init__(self, vae: torch.nn.Module, upcast: bool = False):
        p = next(vae.parameters())
        upcast = upcast and p.dtype == torch.float16
        names, tensors = _held(vae, torch.bfloat16 if upcast else None)
        self._hold(names, tensors, _config_json(vae), ldm_names=False)

    def decode(self, latents: torch.Tensor) -> torch.Tensor:
        """Unscaled latents [N, c, h, w] -> image [N, 3, H, W] in [-1, 1], in the latents' dtype."""
        image = self.module.decode(_nhwc(latents.to(self.dtype)))
        return image.permute(0, 3, 1, 2).to(latents.dtype)

    def encode(self, image: torch.Tensor) -> torch.Tensor:
        """image [N, 3, H, W] in [-1, 1] -> moments [N, 2c, h, w] (mean, then log-variance), in the image's
        dtype."""
        moments = self.module.encode(_nhwc(image.to(self.dtype)))
        return moments.permute(0, 3, 1, 2).to(image.dtype)
