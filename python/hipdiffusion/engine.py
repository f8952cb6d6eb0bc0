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


class EngineUnet:
    """A diffusers UNet2DConditionModel (SD1.x/2.x/SDXL) through the engine."""

    def __init__(self, unet: torch.nn.Module):
        p = next(unet.parameters())
        problem = placement_unsupported(p.device, p.dtype)
        if problem is not None:
            raise ValueError(f"hipdiffusion engine UNet: {problem}")
        self.dtype = p.dtype
        names, tensors = _held(unet)
        self.module = torch.classes.hipdiffusion.Unet(names, tensors, _config_json(unet))

    def __call__(self, sample: torch.Tensor, timestep, context: torch.Tensor,
                 text_embeds: Optional[torch.Tensor] = None, time_ids: Optional[torch.Tensor] = None) -> torch.Tensor:
        """sample [N, C, h, w] and context [N, L, D] in the model's dtype -> prediction [N, C', h, w]
        (channels_last memory)."""
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


class EngineVae:
    """A diffusers AutoencoderKL through the engine. With `upcast` (where diffusers would run a float16
    VAE in float32: SDXL's pipelines, for a VAE whose config says force_upcast), it computes in bfloat16
    instead, on a bfloat16 copy of its weights: float32's range at half the memory, and the GPU kernels'
    dtype."""

    def __init__(self, vae: torch.nn.Module, upcast: bool = False):
        p = next(vae.parameters())
        problem = placement_unsupported(p.device, p.dtype)
        if problem is not None:
            raise ValueError(f"hipdiffusion engine VAE: {problem}")
        upcast = upcast and p.dtype == torch.float16
        self.dtype = torch.bfloat16 if upcast else p.dtype
        names, tensors = _held(vae, self.dtype if upcast else None)
        self.module = torch.classes.hipdiffusion.Vae(names, tensors, _config_json(vae))

    def decode(self, latents: torch.Tensor) -> torch.Tensor:
        """Unscaled latents [N, c, h, w] -> image [N, 3, H, W] in [-1, 1], in the latents' dtype."""
        image = self.module.decode(_nhwc(latents.to(self.dtype)))
        return image.permute(0, 3, 1, 2).to(latents.dtype)

    def encode(self, image: torch.Tensor) -> torch.Tensor:
        """image [N, 3, H, W] in [-1, 1] -> moments [N, 2c, h, w] (mean, then log-variance), in the image's
        dtype."""
        moments = self.module.encode(_nhwc(image.to(self.dtype)))
        return moments.permute(0, 3, 1, 2).to(image.dtype)
