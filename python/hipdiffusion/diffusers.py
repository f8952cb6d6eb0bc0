"""One line for a diffusers pipeline: `pipe = hipdiffusion.diffusers.optimize(pipe)`.

Runs the UNet's and the VAE's attention, GroupNorm and GEGLU through hipdiffusion's ops (each with its
automatic fallback) by patching the pipeline's own modules: attention through an attention processor
(`set_attn_processor`), GroupNorm and GEGLU through their instances' `forward`, and each ResNet block's
forward so that its two GroupNorms take the SiLU after them in the same pass. Weights stay where they
are (state_dict keys unchanged, LoRA weights fused before or after keep working), schedulers, callbacks
and everything else stay diffusers'. The models are put in channels_last memory, the layout the
engine's kernels read without a copy. `restore(pipe)` undoes all of it.

mode="engine" runs the whole UNet and VAE through the engine (hipdiffusion.engine) on the pipeline's own
weights (shared, not copied; on a GPU the UNet as captured graphs): the UNet's forward, the VAE's decode
and encode are replaced, everything else (schedulers, callbacks, the text encoders) stays diffusers'. The
weights are read when optimize is called: fuse LoRA weights, move and cast the pipeline before it. A call
the engine does not cover (ControlNet residuals, attention masks, class labels or a guidance embedding,
gradients) runs diffusers' own forward, counted in fallback_report().
"""

import types
from typing import Optional

import torch
from torch import nn

from . import ops
from .fallback import record

_STATE = "_hipdiffusion_state"


class AttnProcessor:
    """diffusers' attention (self and cross, the VAE's single-head image attention included) with the
    product through hipdiffusion.ops.attention on the projections as they come ([B, L, heads*D]: no
    head split). What it does not cover (masks, q/k norms, added KV projections) runs the processor it
    replaced, counted as a fallback."""

    def __init__(self, original):
        self.original = original

    def _unsupported(self, attn, attention_mask) -> Optional[str]:
        if attention_mask is not None:
            return "attention mask"
        if getattr(attn, "norm_q", None) is not None or getattr(attn, "norm_k", None) is not None:
            return "q/k normalisation"
        if getattr(attn, "add_k_proj", None) is not None:
            return "added key/value projections"
        return None

    def __call__(self, attn, hidden_states, encoder_hidden_states=None, attention_mask=None, temb=None,
                 *args, **kwargs):
        reason = self._unsupported(attn, attention_mask)
        if reason is not None:
            record("diffusers attention", reason)
            return self.original(attn, hidden_states, encoder_hidden_states, attention_mask, temb, *args, **kwargs)
        residual = hidden_states
        if attn.spatial_norm is not None:
            hidden_states = attn.spatial_norm(hidden_states, temb)
        image_shape = hidden_states.shape if hidden_states.ndim == 4 else None
        if image_shape is not None:  # [B, C, H, W] -> tokens [B, H*W, C] (no copy when channels_last)
            b, c, h, w = image_shape
            hidden_states = hidden_states.reshape(b, c, h * w).transpose(1, 2)
        if attn.group_norm is not None:
            hidden_states = attn.group_norm(hidden_states.transpose(1, 2)).transpose(1, 2)
        context = hidden_states if encoder_hidden_states is None else encoder_hidden_states
        if encoder_hidden_states is not None and attn.norm_cross:
            context = attn.norm_encoder_hidden_states(context)
        q, k, v = attn.to_q(hidden_states), attn.to_k(context), attn.to_v(context)
        out = ops.attention(q.contiguous(), k.contiguous(), v.contiguous(), attn.heads, scale=attn.scale)
        out = attn.to_out[1](attn.to_out[0](out))  # output projection, then dropout
        if image_shape is not None:
            out = out.transpose(1, 2).reshape(image_shape)
        if attn.residual_connection:
            out = out + residual
        return out / attn.rescale_output_factor


def _group_norm_forward(self, x):
    return ops.group_norm(x, self.num_groups, self.weight, self.bias, self.eps)


def _geglu_forward(self, hidden_states, *args, **kwargs):
    return ops.geglu(self.proj(hidden_states), "none")


def _fusable_resnet(block) -> bool:
    """A ResnetBlock2D as SD's UNets and VAEs use it: GroupNorm, SiLU, no resampling inside the block,
    the time embedding added before the second norm."""
    return (block.upsample is None and block.downsample is None and block.time_embedding_norm == "default"
            and isinstance(block.nonlinearity, nn.SiLU) and isinstance(block.norm1, nn.GroupNorm)
            and isinstance(block.norm2, nn.GroupNorm))


def _resnet_forward(self, input_tensor, temb, *args, **kwargs):
    """diffusers' ResnetBlock2D with each GroupNorm and the SiLU after it in one pass (ops.group_norm's
    silu): norm1+SiLU, conv1, + projected time embedding, norm2+SiLU, dropout, conv2, + shortcut."""
    n1, n2 = self.norm1, self.norm2
    if not input_tensor.is_contiguous(memory_format=torch.channels_last):
        # SDXL's transformers (linear projections) hand back NCHW-contiguous images: one copy here keeps
        # the block, its shortcut and the convolutions after it in channels_last, where the GroupNorms run
        # ours instead of falling back.
        input_tensor = input_tensor.contiguous(memory_format=torch.channels_last)
    hidden = ops.group_norm(input_tensor, n1.num_groups, n1.weight, n1.bias, n1.eps, silu=True)
    hidden = self.conv1(hidden)
    if self.time_emb_proj is not None and temb is not None:
        hidden = hidden + self.time_emb_proj(temb if self.skip_time_act else self.nonlinearity(temb))[:, :, None, None]
    hidden = ops.group_norm(hidden, n2.num_groups, n2.weight, n2.bias, n2.eps, silu=True)
    hidden = self.conv2(self.dropout(hidden))
    shortcut = self.conv_shortcut(input_tensor) if self.conv_shortcut is not None else input_tensor
    return (shortcut + hidden) / self.output_scale_factor


def _models(pipe):
    return [m for m in (getattr(pipe, "unet", None), getattr(pipe, "vae", None)) if m is not None]


def optimize(pipe, mode: str = "processors"):
    """Patches `pipe` (a StableDiffusion[XL][Img2Img]Pipeline, or anything with a diffusers `unet`
    and/or `vae`) in place and returns it. Calling it twice with the same mode is harmless; another mode
    restores the pipeline first."""
    if mode not in ("processors", "engine"):
        raise ValueError(f"hipdiffusion.diffusers.optimize: mode must be 'processors' or 'engine', got {mode!r}")
    models = _models(pipe)
    if not models:
        raise ValueError("hipdiffusion.diffusers.optimize: the pipeline has neither a unet nor a vae")
    current = getattr(pipe, _STATE, None)
    if current is not None:
        if current["mode"] == mode:
            return pipe
        restore(pipe)
    if mode == "engine":
        from ._diffusers_engine import optimize_engine
        return optimize_engine(pipe)
    from diffusers.models.activations import GEGLU
    from diffusers.models.resnet import ResnetBlock2D

    state = {"mode": mode, "processors": [], "patched": [], "formats": [], "engines": []}
    for model in models:
        originals = model.attn_processors
        state["processors"].append((model, originals))
        model.set_attn_processor({name: AttnProcessor(p) for name, p in originals.items()})
        for module in model.modules():
            if isinstance(module, nn.GroupNorm):
                module.forward = types.MethodType(_group_norm_forward, module)
                state["patched"].append(module)
            elif isinstance(module, GEGLU):
                module.forward = types.MethodType(_geglu_forward, module)
                state["patched"].append(module)
            elif isinstance(module, ResnetBlock2D) and _fusable_resnet(module):
                module.forward = types.MethodType(_resnet_forward, module)
                state["patched"].append(module)
        state["formats"].append((model, _memory_format(model)))
        model.to(memory_format=torch.channels_last)
    setattr(pipe, _STATE, state)
    return pipe


def restore(pipe):
    """Undoes optimize(pipe): the original processors, forwards and memory format."""
    state = getattr(pipe, _STATE, None)
    if state is None:
        return pipe
    for model, originals in state["processors"]:
        model.set_attn_processor(originals)
    for module in state["patched"]:
        del module.forward  # the instance attribute: the class's forward shows through again
    for model, memory_format in state["formats"]:
        model.to(memory_format=memory_format)
    for model, attributes in state["engines"]:
        for name in attributes:
            delattr(model, name)  # the instance attribute: the class's method shows through again
    setattr(pipe, _STATE, None)
    return pipe


def _memory_format(model) -> torch.memory_format:
    for p in model.parameters():
        if p.dim() == 4:
            return torch.channels_last if p.is_contiguous(memory_format=torch.channels_last) and not p.is_contiguous() \
                else torch.contiguous_format
    return torch.contiguous_format
