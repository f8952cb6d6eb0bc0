"""PyTorch's own ops, in the engine ops' conventions: what an op falls back to, and what the
gradients fall back to where the engine has no gradient kernel (through torch.func.vjp)."""

from typing import Optional

import torch
import torch.nn.functional as F

from .support import channels_first_permutation, channels_last_permutation


def attention(q, k, v, heads: int, causal: bool, scale: float) -> torch.Tensor:
    """q [B, Lq, H*D], k and v [B, Lk, H*D] -> [B, Lq, H*D], through scaled_dot_product_attention."""
    b, lq, width = q.shape
    d = width // heads

    def split(t):
        return t.reshape(b, t.shape[1], heads, d).transpose(1, 2)

    out = F.scaled_dot_product_attention(
        split(q), split(k), split(v), is_causal=causal, scale=scale if scale > 0 else None
    )
    return out.transpose(1, 2).reshape(b, lq, width)


def group_norm_channels_last(x, weight, bias, groups: int, eps: float, silu: bool) -> torch.Tensor:
    """x [N, *spatial, C] (the engine's layout)."""
    nchw = x.permute(channels_first_permutation(x.dim()))
    y = F.group_norm(nchw, groups, weight, bias, eps).permute(channels_last_permutation(nchw))
    return F.silu(y) if silu else y


def layer_norm(x, weight, bias, eps: float) -> torch.Tensor:
    return F.layer_norm(x, (x.shape[-1],), weight, bias, eps)


def geglu(x, approximate: str) -> torch.Tensor:
    value, gate = x.chunk(2, dim=-1)
    return value * F.gelu(gate, approximate=approximate)


def linear(x, weight, bias: Optional[torch.Tensor], residual: Optional[torch.Tensor]) -> torch.Tensor:
    y = F.linear(x, weight, bias)
    return y + residual if residual is not None else y


def conv2d_channels_last(x, weight, bias, residual, stride: int, padding: int) -> torch.Tensor:
    """x [N, H, W, Cin], weight [Cout, kh, kw, Cin] (the engine's layout) -> [N, Ho, Wo, Cout]."""
    y = F.conv2d(x.permute(0, 3, 1, 2), weight.permute(0, 3, 1, 2), bias, stride, padding).permute(0, 2, 3, 1)
    return y + residual if residual is not None else y
