"""The public ops, in PyTorch's conventions (NCHW-shaped images, [out, in, kh, kw] convolution weights).

Each checks its arguments (a ValueError for invalid input, whatever runs), asks support.py whether the
engine's kernel takes the tensors, and runs torch.ops.hipdiffusion.* or, with the reason counted,
PyTorch's own op. Images reach the engine as channels-last views: an NCHW-shaped tensor whose memory is
channels_last (x.to(memory_format=torch.channels_last)) costs no copy; others fall back.
"""

from typing import Optional

import torch

from . import reference
from ._registrations import FORMULAS  # (importing it registers the fake functions and autograd)
from .fallback import record
from .support import (backward_unsupported, channels_first_permutation, channels_last_permutation,
                      kernel_unsupported)

_ops = torch.ops.hipdiffusion


class _EagerAutograd(torch.autograd.Function):
    """An operator and its autograd formula (_registrations.FORMULAS) as one autograd.Function: the same
    setup and backward that torch.library's autograd kernel runs, without its per-call layers. A small
    attention's forward + backward on a GPU is the host's time: on an H200 machine (2026-11-27) 206-222 us
    this way, 260-367 us through torch.library, SDPA's 175-220 us."""

    @staticmethod
    def forward(ctx, op, setup, backward, *args):
        with torch._C._AutoDispatchBelowAutograd():
            out = op(*args)
        setup(ctx, args, out)
        ctx.formula_backward = backward
        return out

    @staticmethod
    def backward(ctx, *grads):
        return (None, None, None, *ctx.formula_backward(ctx, *grads))


def _run(op, tensors, *args):
    """Calls the operator `op` (an OpOverload). Where a gradient can be asked for (grad mode on and an
    input requiring one) it runs with its formula as one autograd.Function (_EagerAutograd); where none
    can, below the autograd layer (torch.library's Python autograd kernel measured 8 us per call on this
    project's CI machine, more than the whole dispatch of a small op). While torch.compile traces, the
    operator itself, whose registered autograd and fake function the compiler reads."""
    if torch.compiler.is_compiling():
        return op(*args)
    if torch.is_grad_enabled() and any(t.requires_grad for t in tensors):
        setup, backward = FORMULAS[op]
        return _EagerAutograd.apply(op, setup, backward, *args)
    with torch._C._AutoDispatchBelowAutograd():
        return op(*args)


class _Invalid(ValueError):
    """Invalid input (raised whichever path would run). The checks below format their messages only when
    they fail: an f-string per call cost more than PyTorch's whole dispatch of a small op."""


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, heads: int, *, causal: bool = False,
              scale: Optional[float] = None) -> torch.Tensor:
    """softmax(q kᵀ · scale) v per head, for q [B, Lq, heads*D], k and v [B, Lk, heads*D] (diffusers'
    projections, unsplit) -> [B, Lq, heads*D]. scale defaults to 1/sqrt(D); causal masks keys after the
    query (top-left aligned, as torch's is_causal)."""
    if not (q.dim() == 3 and k.dim() == 3 and v.dim() == 3):
        raise _Invalid(f"attention: q, k, v must be [B, L, heads*D], got {tuple(q.shape)}, {tuple(k.shape)}, "
                       f"{tuple(v.shape)}")
    if not (heads >= 1 and q.shape[2] % heads == 0):
        raise _Invalid(f"attention: width {q.shape[2]} does not split into {heads} heads")
    if not (k.shape[0] == q.shape[0] and k.shape[2] == q.shape[2] and v.shape == k.shape):
        raise _Invalid(f"attention: k {tuple(k.shape)} and v {tuple(v.shape)} do not fit q {tuple(q.shape)}")
    if not (scale is None or scale > 0):
        raise _Invalid(f"attention: scale must be positive, got {scale}")
    scale_value = 0.0 if scale is None else float(scale)
    reason = kernel_unsupported(q, k, v)
    if reason is None:
        # Where a GPU gradient kernel of ours will run, the forward also keeps each row's log-sum-exp, so
        # that the gradient need not recompute it from q and k (the CPU's gradient recomputes it anyway).
        if (q.is_cuda and torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad)
                and backward_unsupported("attention", q, k, v, heads=heads) is None):
            return _run(_ops.attention_with_lse.default, (q, k, v), q, k, v, heads, causal, scale_value)[0]
        return _run(_ops.attention.default, (q, k, v), q, k, v, heads, causal, scale_value)
    record("attention", reason)
    return reference.attention(q, k, v, heads, causal, scale_value)


def _affine(x: torch.Tensor, weight: Optional[torch.Tensor], bias: Optional[torch.Tensor], channels: int):
    """weight and bias in x's dtype, ones and zeros where absent (affine=False modules)."""
    dtype = x.dtype
    if weight is None:
        weight = torch.ones(channels, dtype=dtype, device=x.device)
    elif weight.dtype != dtype:
        weight = weight.to(dtype)
    if bias is None:
        bias = torch.zeros(channels, dtype=dtype, device=x.device)
    elif bias.dtype != dtype:
        bias = bias.to(dtype)
    if not (weight.shape == (channels,) and bias.shape == (channels,)):
        raise _Invalid(f"weight {tuple(weight.shape)} and bias {tuple(bias.shape)} must be [{channels}]")
    return weight, bias


def group_norm(x: torch.Tensor, groups: int, weight: Optional[torch.Tensor] = None,
               bias: Optional[torch.Tensor] = None, eps: float = 1e-5, *, silu: bool = False) -> torch.Tensor:
    """torch.nn.functional.group_norm for x [N, C, *spatial], then SiLU when silu (fused: one pass)."""
    if not (x.dim() >= 2):
        raise _Invalid(f"group_norm: input {tuple(x.shape)} must be [N, C, ...]")
    channels = x.shape[1]
    if not (groups >= 1 and channels % groups == 0):
        raise _Invalid(f"group_norm: {channels} channels do not split into {groups} groups")
    if not (eps > 0):
        raise _Invalid(f"group_norm: eps must be positive, got {eps}")
    weight, bias = _affine(x, weight, bias, channels)
    channels_last = x.permute(channels_last_permutation(x))
    reason = kernel_unsupported(x, weight, bias)
    if reason is None and not channels_last.is_contiguous():
        reason = "input is not channels_last in memory (x.to(memory_format=torch.channels_last))"
    if reason is None:
        y = _run(_ops.group_norm.default, (x, weight, bias), channels_last, weight, bias, groups, float(eps), silu)
    else:
        record("group_norm", reason)
        y = reference.group_norm_channels_last(channels_last, weight, bias, groups, float(eps), silu)
    return y.permute(channels_first_permutation(x.dim()))


def layer_norm(x: torch.Tensor, weight: Optional[torch.Tensor] = None, bias: Optional[torch.Tensor] = None,
               eps: float = 1e-5) -> torch.Tensor:
    """torch.nn.functional.layer_norm over the last dimension."""
    if not (x.dim() >= 1):
        raise _Invalid("layer_norm: input has no dimensions")
    if not (eps > 0):
        raise _Invalid(f"layer_norm: eps must be positive, got {eps}")
    weight, bias = _affine(x, weight, bias, x.shape[-1])
    reason = kernel_unsupported(x, weight, bias)
    if reason is None:
        return _run(_ops.layer_norm.default, (x, weight, bias), x, weight, bias, float(eps))
    record("layer_norm", reason)
    return reference.layer_norm(x, weight, bias, float(eps))


def geglu(x: torch.Tensor, approximate: str = "none") -> torch.Tensor:
    """value · gelu(gate) for x = [value, gate] along the last dimension (diffusers' GEGLU after its
    projection): [..., 2N] -> [..., N]."""
    if not (x.dim() >= 1 and x.shape[-1] % 2 == 0):
        raise _Invalid(f"geglu: input {tuple(x.shape)} must end in an even dimension")
    if not (approximate in ("none", "tanh")):
        raise _Invalid(f"geglu: approximate must be 'none' or 'tanh', got {approximate!r}")
    reason = kernel_unsupported(x)
    if reason is None:
        return _run(_ops.geglu.default, (x,), x, approximate)
    record("geglu", reason)
    return reference.geglu(x, approximate)


def linear(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor] = None,
           residual: Optional[torch.Tensor] = None) -> torch.Tensor:
    """x · weightᵀ + bias (+ residual, added in the product's epilogue)."""
    if not (x.dim() >= 1 and weight.dim() == 2 and x.shape[-1] == weight.shape[1]):
        raise _Invalid(f"linear: input {tuple(x.shape)} does not fit weight {tuple(weight.shape)} ([out, in])")
    out_shape = (*x.shape[:-1], weight.shape[0])
    if not (bias is None or tuple(bias.shape) == (weight.shape[0],)):
        raise _Invalid(f"linear: bias {tuple(bias.shape)} must be [{weight.shape[0]}]")
    if not (residual is None or tuple(residual.shape) == out_shape):
        raise _Invalid(f"linear: residual {tuple(residual.shape)} must be {out_shape}")
    extra = [t for t in (bias, residual) if t is not None]
    reason = kernel_unsupported(x, weight, *extra)
    if reason is None:
        return _run(_ops.linear.default, (x, weight, *extra), x, weight, bias, residual)
    record("linear", reason)
    return reference.linear(x, weight, bias, residual)


def conv2d(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor] = None, stride: int = 1,
           padding: int = 0, residual: Optional[torch.Tensor] = None) -> torch.Tensor:
    """torch.nn.functional.conv2d (square stride and padding, no dilation, one group), plus residual.
    The engine's kernels read x and weight channels last: channels_last tensors cost no copy."""
    if not (x.dim() == 4 and weight.dim() == 4 and x.shape[1] == weight.shape[1]):
        raise _Invalid(f"conv2d: input {tuple(x.shape)} does not fit weight {tuple(weight.shape)} "
                       "([out, in, kh, kw])")
    if not (stride >= 1 and padding >= 0):
        raise _Invalid(f"conv2d: stride {stride} and padding {padding} out of range")
    x_nhwc = x.permute(0, 2, 3, 1)
    w_ohwi = weight.permute(0, 2, 3, 1)
    r_nhwc = residual.permute(0, 2, 3, 1) if residual is not None else None
    extra = [t for t in (bias, residual) if t is not None]
    reason = kernel_unsupported(x, weight, *extra)
    if reason is None and not x_nhwc.is_contiguous():
        reason = "input is not channels_last in memory (x.to(memory_format=torch.channels_last))"
    if reason is None:
        y = _run(_ops.conv2d.default, (x, weight, *extra), x_nhwc, w_ohwi, bias, r_nhwc, stride, padding)
    else:
        record("conv2d", reason)
        y = reference.conv2d_channels_last(x_nhwc, w_ohwi, bias, r_nhwc, stride, padding)
    return y.permute(0, 3, 1, 2)
