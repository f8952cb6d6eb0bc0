"""The engine's attention as an AUTOMATIC1111 cross-attention optimization.

A1111's optimizations (Settings > Optimizations > Cross attention optimization) are SdOptimization
objects whose apply() sets CrossAttention.forward of its ldm and sgm copies (SD1.x/2.x and SDXL), and
whose undo() puts A1111's own back. Ours keeps everything of A1111's forward but the attention itself:
the hypernetworks on the context, A1111's own projections (so that the Lora extension's weights apply),
then the engine's flash attention for softmax(q k^T / sqrt(d)) v. What the kernel does not take (a mask,
a dtype or device without kernels) runs A1111's scaled-dot-product forward, counted in
hipdiffusion.fallback_report() under "a1111.attention".

The VAE's attention block (one 512-wide head over every pixel) is left to PyTorch's scaled dot product,
as A1111's SDP optimization sets it: the engine's flash kernel takes heads up to 160 wide, and a wider
one would run its materialised path (the whole score matrix).
"""

import importlib
from typing import Optional

import torch

from hipdiffusion import fallback, ops
from hipdiffusion.support import kernel_unsupported, placement_unsupported

NAME = "hipDiffusion"
_OP = "a1111.attention"
# A1111 leaves logging unconfigured (warnings only): what the user should see is printed, as A1111's own is.
_announced = False  # the first call the kernel computes is announced


def cross_attention_forward(self, x: torch.Tensor, context: Optional[torch.Tensor] = None, mask=None, **kwargs):
    """CrossAttention.forward (ldm's and sgm's): x [B, N, C], context [B, M, C'] -> [B, N, C]."""
    from modules import sd_hijack_optimizations, shared
    from modules.hypernetworks import hypernetwork

    if mask is not None:
        fallback.record(_OP, "an attention mask")
        return sd_hijack_optimizations.scaled_dot_product_attention_forward(self, x, context, mask, **kwargs)
    context_k, context_v = hypernetwork.apply_hypernetworks(shared.loaded_hypernetworks, x if context is None else context)
    q, k, v = self.to_q(x), self.to_k(context_k), self.to_v(context_v)
    reason = kernel_unsupported(q, k, v)
    if reason is not None:  # recomputes the projections: the rare path pays, not the common one
        fallback.record(_OP, reason)
        return sd_hijack_optimizations.scaled_dot_product_attention_forward(self, x, context, mask, **kwargs)
    global _announced
    if not _announced:
        _announced = True
        print(f"hipdiffusion: A1111's cross-attention through the engine's kernel ({q.dtype}, {q.device})")
    # shared.opts.upcast_attn needs nothing more: the kernel keeps its scores, softmax and sums in float32.
    return self.to_out(ops.attention(q, k, v, self.heads))


def unavailable(device) -> Optional[str]:
    """None when the engine has attention kernels on `device`; else why not. The dtype is not asked here:
    A1111 lists optimizations before it loads a model and knows the UNet's dtype; each call checks its
    own tensors (and falls back)."""
    device = torch.device(device)
    return placement_unsupported(device, torch.float32 if device.type == "cpu" else torch.float16)


def make_optimization(sd_hijack_optimizations, devices):
    """The SdOptimization, made from A1111's own class (A1111's modules are passed in: this file is
    imported where they are not too, by the tests)."""

    class HipDiffusionAttention(sd_hijack_optimizations.SdOptimization):
        name = NAME  # A1111 lists it by title(): the name alone, without a label, is what users type
        label = None
        cmd_opt = None
        # Chosen by "Automatic" on ROCm builds of PyTorch, whose SDPA lacks fast kernels on many AMD GPUs;
        # elsewhere below all of A1111's own (xformers 100 down to sub-quadratic's 10), for the user to pick.
        priority = 110 if getattr(torch.version, "hip", None) else 5

        def is_available(self):
            reason = unavailable(devices.device)
            if reason is not None:
                print(f"hipdiffusion: the attention optimization is unavailable: {reason}")
            return reason is None

        def apply(self):
            for package in ("ldm", "sgm"):  # SD1.x/2.x's modules and SDXL's
                attention = importlib.import_module(f"{package}.modules.attention")
                model = importlib.import_module(f"{package}.modules.diffusionmodules.model")
                attention.CrossAttention.forward = cross_attention_forward
                model.AttnBlock.forward = sd_hijack_optimizations.sdp_attnblock_forward

    return HipDiffusionAttention()
