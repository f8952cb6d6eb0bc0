"""hipdiffusion.diffusers.optimize(pipe, mode="engine"): the UNet's forward and the VAE's decode and encode
replaced by the engine's whole models (hipdiffusion.engine) on the pipeline's own weights, each call
checked first: what the engine does not cover runs diffusers' own method, counted in fallback_report().
restore() (hipdiffusion.diffusers) undoes it through the state kept on the pipeline."""

import types
from typing import Optional

import torch
from diffusers.models.autoencoders.autoencoder_kl import AutoencoderKL
from diffusers.models.unets.unet_2d_condition import UNet2DConditionModel

from .diffusers import _STATE, _memory_format
from .engine import EngineUnet, EngineVae
from .fallback import disabled, record


def optimize_engine(pipe):
    """optimize(pipe, mode="engine"): see hipdiffusion.diffusers."""
    state = {"mode": "engine", "processors": [], "patched": [], "formats": [], "engines": []}
    unet, vae = getattr(pipe, "unet", None), getattr(pipe, "vae", None)
    # Where diffusers runs a float16 VAE in float32 (SDXL's pipelines, force_upcast), the engine runs it in
    # bfloat16.
    upcast = hasattr(pipe, "upcast_vae") and vae is not None and bool(getattr(vae.config, "force_upcast", False))
    engines = []
    for model, kind, make in ((unet, UNet2DConditionModel, EngineUnet),
                              (vae, AutoencoderKL, lambda m: EngineVae(m, upcast))):
        if model is None:
            continue
        if not isinstance(model, kind):
            raise NotImplementedError(f"hipdiffusion.diffusers.optimize(mode='engine'): a {type(model).__name__} "
                                      f"is not a {kind.__name__}, the only kind the engine runs")
        # The engine reads convolution kernels as [Cout, kh, kw, Cin]: channels_last memory.
        state["formats"].append((model, _memory_format(model)))
        model.to(memory_format=torch.channels_last)
        try:
            engines.append((model, make(model)))
        except Exception:
            for m, memory_format in state["formats"]:
                m.to(memory_format=memory_format)
            raise
    for model, engine in engines:
        if isinstance(engine, EngineUnet):
            model.forward = types.MethodType(_engine_unet_forward(engine, model.forward), model)
            state["engines"].append((model, ["forward", "_hipdiffusion_engine"]))
        else:
            model.decode = types.MethodType(_engine_vae_decode(engine, model.decode), model)
            model.encode = types.MethodType(_engine_vae_encode(engine, model.encode), model)
            state["engines"].append((model, ["decode", "encode", "_hipdiffusion_engine"]))
        model._hipdiffusion_engine = engine
    setattr(pipe, _STATE, state)
    return pipe


# UNet2DConditionModel.forward's arguments the engine does not take; any of them given (not None, not
# empty) sends the call to diffusers' own forward.
_UNET_UNCOVERED = ("class_labels", "timestep_cond", "attention_mask", "cross_attention_kwargs",
                   "down_block_additional_residuals", "mid_block_additional_residual",
                   "down_intrinsic_block_additional_residuals", "encoder_attention_mask")


def _engine_unet_forward(engine, original):
    def forward(self, sample, timestep, encoder_hidden_states, *args, added_cond_kwargs=None, return_dict=True,
                **kwargs):
        reason = _unet_uncovered(self, sample, encoder_hidden_states, args, kwargs, added_cond_kwargs)
        if reason is not None:
            record("engine unet", reason)
            return original(sample, timestep, encoder_hidden_states, *args, added_cond_kwargs=added_cond_kwargs,
                            return_dict=return_dict, **kwargs)
        added = added_cond_kwargs or {}
        out = engine(sample, timestep, encoder_hidden_states, added.get("text_embeds"), added.get("time_ids"))
        if not return_dict:
            return (out,)
        from diffusers.models.unets.unet_2d_condition import UNet2DConditionOutput
        return UNet2DConditionOutput(sample=out)

    return forward


def _unet_uncovered(unet, sample, context, args, kwargs, added) -> Optional[str]:
    if disabled():
        return "disabled"
    if args:
        return "positional arguments after encoder_hidden_states"
    for name in _UNET_UNCOVERED:
        value = kwargs.get(name)
        if value is not None and not (isinstance(value, (dict, list, tuple)) and len(value) == 0):
            return name
    unknown = set(kwargs) - set(_UNET_UNCOVERED)
    if unknown:
        return f"arguments {sorted(unknown)}"
    if torch.is_grad_enabled() and (sample.requires_grad or context.requires_grad
                                    or any(p.requires_grad for p in unet.parameters())):
        return "gradients (the engine runs inference only)"
    if sample.dim() != 4 or context.dim() != 3:
        return "input ranks"
    p = unet.conv_in.weight
    if sample.dtype != p.dtype or context.dtype != p.dtype or sample.device != p.device:
        return "inputs in another dtype or on another device than the weights"
    if getattr(unet.config, "addition_embed_type", None) == "text_time" and \
            not (added and added.get("text_embeds") is not None and added.get("time_ids") is not None):
        return "SDXL conditioning missing"
    return None


def _engine_vae_decode(engine, original):
    def decode(self, z, return_dict=True, generator=None, **kwargs):  # AutoencoderKL.decode ignores generator
        reason = "disabled" if disabled() else _vae_uncovered(self, z, kwargs)
        if reason is not None:
            record("engine vae decode", reason)
            return original(z, return_dict=return_dict, generator=generator, **kwargs)
        image = engine.decode(z)
        if not return_dict:
            return (image,)
        from diffusers.models.autoencoders.vae import DecoderOutput
        return DecoderOutput(sample=image)

    return decode


def _engine_vae_encode(engine, original):
    def encode(self, x, return_dict=True, **kwargs):
        reason = "disabled" if disabled() else _vae_uncovered(self, x, kwargs)
        if reason is not None:
            record("engine vae encode", reason)
            return original(x, return_dict=return_dict, **kwargs)
        from diffusers.models.autoencoders.vae import DiagonalGaussianDistribution
        from diffusers.models.modeling_outputs import AutoencoderKLOutput
        posterior = DiagonalGaussianDistribution(engine.encode(x))
        return AutoencoderKLOutput(latent_dist=posterior) if return_dict else (posterior,)

    return encode


def _vae_uncovered(vae, x, kwargs) -> Optional[str]:
    if kwargs:
        return f"arguments {sorted(kwargs)}"
    if x.dim() != 4:
        return "input rank"
    if torch.is_grad_enabled() and (x.requires_grad or any(p.requires_grad for p in vae.parameters())):
        return "gradients (the engine runs inference only)"
    if x.device != next(vae.parameters()).device:
        return "input on another device than the weights"
    return None
