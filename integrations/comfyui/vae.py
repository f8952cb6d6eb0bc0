"""A ComfyUI VAE's decode and encode through the engine, on the VAE's own weights.

The engine decodes whole or, where the whole decode does not fit in device memory, in exact tiles: the
whole decode's picture, one tile's activations on the device at a time, no seams (ComfyUI's fallback,
after running out of memory, is blended tiles that differ from the whole decode). A VAE the engine does
not take (not Stable Diffusion's AutoencoderKL, a video VAE, float32 weights on a GPU, weights ComfyUI
casts as it runs) goes to ComfyUI's own decode or encode, counted in hipdiffusion.fallback_report() under
"comfyui.vae".
"""

import json
import logging
import weakref
from typing import Optional

import torch

from hipdiffusion import fallback, held
from hipdiffusion.engine import EngineVae

_OP = "comfyui.vae"
_log = logging.getLogger("hipdiffusion")
_announced: "weakref.WeakSet" = weakref.WeakSet()  # the VAE models whose first engine call was logged


def _kind_unsupported(vae) -> Optional[str]:
    model = getattr(vae, "first_stage_model", None)
    if model is None:
        return "no VAE model"
    if type(model).__name__ != "AutoencoderKL" or getattr(vae, "latent_dim", 2) != 2 or \
            getattr(vae, "extra_1d_channel", None) is not None:
        return f"a {type(model).__name__} (the engine runs Stable Diffusion's 2-D AutoencoderKL)"
    return None


def unsupported(vae) -> Optional[str]:
    """None when the engine can run this ComfyUI VAE (as it is loaded now); else why not."""
    reason = _kind_unsupported(vae)
    if reason is not None:
        return reason
    return held.weights_unsupported(vae.first_stage_model, list(vae.first_stage_model.named_parameters()))


def _engine(model) -> EngineVae:
    """The engine's VAE over the model's weights as they are now. Made for each call and dropped after
    it (it views the weights, which takes no copy and little time), so that nothing keeps weights alive
    that ComfyUI unloads or moves between calls."""
    named = list(model.named_parameters())
    held.in_engine_layout(named)  # converts once: later calls find the kernels in channels_last memory
    config = json.dumps({"norm_num_groups": held.group_count(model)})
    engine = EngineVae.from_weights([n for n, _ in named], [p.detach() for _, p in named], config, ldm_names=True)
    if model not in _announced:
        _announced.add(model)
        _log.info("hipdiffusion: ComfyUI's VAE through the engine (%d tensors held, %s on %s)", len(named),
                  engine.dtype, named[0][1].device)
    return engine


def _loaded(vae, memory_required: int) -> Optional[str]:
    """Loads the VAE where ComfyUI computes with it (freeing other models for the room it needs), then
    says whether the engine takes it as loaded."""
    import comfy.model_management

    comfy.model_management.load_models_gpu([vae.patcher], memory_required=memory_required,
                                           force_full_load=getattr(vae, "disable_offload", False))
    return unsupported(vae)


def decode(vae, latents: torch.Tensor) -> torch.Tensor:
    """ComfyUI's VAE.decode: latents [N, c, h, w] (the VAE's own space, as a LATENT holds them) ->
    images [N, H, W, 3] float32 in [0, 1] on the VAE's output device."""
    reason = _kind_unsupported(vae)
    if reason is None and latents.dim() != 4:
        reason = f"latents of rank {latents.dim()}"
    if reason is None:
        reason = _loaded(vae, vae.memory_used_decode(latents.shape, vae.vae_dtype))
    if reason is not None:
        fallback.record(_OP, reason)
        return vae.decode(latents)
    engine = _engine(vae.first_stage_model)
    device = next(vae.first_stage_model.parameters()).device
    nhwc = latents.to(device, engine.dtype).permute(0, 2, 3, 1).contiguous()
    with torch.no_grad():
        image = engine.module.decode(nhwc)  # [N, H, W, 3] in [-1, 1]
    return vae.process_output(image.to(vae.output_device).float())


def encode(vae, pixels: torch.Tensor) -> torch.Tensor:
    """ComfyUI's VAE.encode: pixels [N, H, W, C] in [0, 1] (the first 3 channels are used, cropped to the
    VAE's multiple as ComfyUI crops them) -> latents [N, c, h, w] float32, the distribution's mean (as
    ComfyUI's AutoencoderKL takes it), on the VAE's output device."""
    reason = _kind_unsupported(vae)
    if reason is None and pixels.dim() != 4:
        reason = f"pixels of rank {pixels.dim()}"
    if reason is None:
        pixels = vae.vae_encode_crop_pixels(pixels[..., :3])
        reason = _loaded(vae, vae.memory_used_encode(pixels.movedim(-1, 1).shape, vae.vae_dtype))
    if reason is not None:
        fallback.record(_OP, reason)
        return vae.encode(pixels[..., :3])
    engine = _engine(vae.first_stage_model)
    device = next(vae.first_stage_model.parameters()).device
    x = vae.process_input(pixels.to(device)).to(engine.dtype).contiguous()
    with torch.no_grad():
        moments = engine.module.encode(x)  # [N, h, w, 2c]: mean, then log-variance
    channels = moments.shape[-1] // 2
    return moments[..., :channels].permute(0, 3, 1, 2).to(vae.output_device).float().contiguous()
