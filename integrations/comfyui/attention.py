"""The engine's attention as ComfyUI's attention function.

ComfyUI's attention functions take (q, k, v, heads, mask=None, attn_precision=None, skip_reshape=False,
skip_output_reshape=False, **kwargs), q [B, L, heads*D] (or [B, heads, L, D] with skip_reshape). Two
ways in, both ComfyUI's own:
- `override`, set per model as transformer_options["optimized_attention_override"] by the
  HipDiffusionAttention node: ComfyUI's wrap_attn calls it with the attention function it would have run,
  which is what an input our kernel does not take goes to;
- `attention`, registered under the name "hipdiffusion" with register_attention_function, for whatever
  picks attention functions by name: what our kernel does not take goes to ComfyUI's PyTorch attention.
Either way a fallback is counted in hipdiffusion.fallback_report() under "comfyui.attention".
"""

import logging
from typing import Callable, Optional

import torch

from hipdiffusion import fallback, ops
from hipdiffusion.support import kernel_unsupported

NAME = "hipdiffusion"
_OP = "comfyui.attention"
_log = logging.getLogger("hipdiffusion")
_announced = False  # the first call the kernel computes is logged


def unsupported(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, heads: int, mask, skip_reshape: bool) -> Optional[str]:
    """None when the engine's kernel computes this call; else why not."""
    if mask is not None:
        return "an attention mask"
    if not isinstance(heads, int) or heads < 1:
        return f"heads {heads!r}"
    rank = 4 if skip_reshape else 3
    if q.dim() != rank or k.dim() != rank or v.dim() != rank:
        return f"q, k, v of ranks {q.dim()}, {k.dim()}, {v.dim()}"
    if skip_reshape and q.shape[1] != heads:
        return f"[B, heads, L, D] tensors with {q.shape[1]} heads for {heads}"
    if k.shape != v.shape or k.shape[0] != q.shape[0] or k.shape[-1] != q.shape[-1]:
        return "k and v shaped unlike q (a different head width for v)"
    if not skip_reshape and q.shape[-1] % heads != 0:
        return f"width {q.shape[-1]} does not split into {heads} heads"
    return kernel_unsupported(q, k, v)


def _joined(t: torch.Tensor) -> torch.Tensor:
    """[B, heads, L, D] -> [B, L, heads*D] (a copy)."""
    b, h, n, d = t.shape
    return t.transpose(1, 2).reshape(b, n, h * d)


def _compute(q, k, v, heads: int, skip_reshape: bool, skip_output_reshape: bool) -> torch.Tensor:
    global _announced
    if not _announced:
        _announced = True
        _log.info("hipdiffusion: ComfyUI's attention through the engine's kernel (%s, %s)", q.dtype, q.device)
    if skip_reshape:
        q, k, v = _joined(q), _joined(k), _joined(v)
    # attn_precision (float32 for SD2.x's upcast attention) needs nothing more: the kernel keeps its
    # scores, softmax and sums in float32 whatever q's dtype.
    out = ops.attention(q, k, v, heads)
    if skip_output_reshape:
        b, n, width = out.shape
        return out.view(b, n, heads, width // heads).transpose(1, 2)
    return out


def _run(fallback_function: Callable, q, k, v, heads, mask=None, attn_precision=None, skip_reshape=False,
         skip_output_reshape=False, **kwargs):
    reason = unsupported(q, k, v, heads, mask, skip_reshape)
    if reason is not None:
        fallback.record(_OP, reason)
        return fallback_function(q, k, v, heads, mask=mask, attn_precision=attn_precision,
                                 skip_reshape=skip_reshape, skip_output_reshape=skip_output_reshape, **kwargs)
    return _compute(q, k, v, heads, skip_reshape, skip_output_reshape)


def override(func: Callable, *args, **kwargs):
    """transformer_options["optimized_attention_override"]: `func` is the attention function ComfyUI was
    about to call (already inside its wrapper, so calling it does not come back here)."""
    return _run(func, *args, **kwargs)


def _comfy_pytorch_attention(*args, **kwargs):
    from comfy.ldm.modules import attention as comfy_attention

    return comfy_attention.attention_pytorch(*args, **kwargs)


def attention(q, k, v, heads, mask=None, attn_precision=None, skip_reshape=False, skip_output_reshape=False,
              **kwargs):
    """An attention function by ComfyUI's signature; what the kernel does not take runs ComfyUI's
    PyTorch attention."""
    return _run(_comfy_pytorch_attention, q, k, v, heads, mask=mask, attn_precision=attn_precision,
                skip_reshape=skip_reshape, skip_output_reshape=skip_output_reshape, **kwargs)


def register() -> bool:
    """Registers `attention` as "hipdiffusion" with ComfyUI (wrapped as its own are, so that a per-model
    override still applies). False where this ComfyUI has no registry of attention functions."""
    try:
        from comfy.ldm.modules import attention as comfy_attention
    except ImportError:
        return False
    register_function = getattr(comfy_attention, "register_attention_function", None)
    if register_function is None:
        return False
    wrap = getattr(comfy_attention, "wrap_attn", None)
    register_function(NAME, wrap(attention) if wrap is not None else attention)
    return True
