"""Fake (shape) functions and autograd formulas of torch.ops.hipdiffusion.*, so that the operators
trace under torch.compile(fullgraph=True) and train. The gradients run the engine's kernels where it has
them (support.backward_unsupported: all four on the CPU and on a GPU, attention's there for heads of a
multiple of 8 up to 160) and PyTorch's own
(torch.func.vjp of reference.py) elsewhere, counted in fallback_report()."""

import torch
from torch.library import register_autograd, register_fake

from . import reference
from .fallback import record
from .support import backward_unsupported

_ops = torch.ops.hipdiffusion


# ---- fake functions: the outputs' shapes, dtypes and (contiguous) strides ----


@register_fake("hipdiffusion::attention")
def _(q, k, v, heads, causal=False, scale=0.0):
    return q.new_empty(q.shape)


@register_fake("hipdiffusion::attention_with_lse")
def _(q, k, v, heads, causal=False, scale=0.0):
    return q.new_empty(q.shape), q.new_empty((q.shape[0], heads, q.shape[1]), dtype=torch.float32)


@register_fake("hipdiffusion::attention_backward")
def _(grad_out, q, k, v, out, heads, causal, scale, lse=None):
    return q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)


@register_fake("hipdiffusion::group_norm")
def _(x, weight, bias, groups, eps, silu=False):
    return x.new_empty(x.shape)


@register_fake("hipdiffusion::group_norm_backward")
def _(grad_out, x, weight, bias, groups, eps, silu):
    return x.new_empty(x.shape), weight.new_empty(weight.shape), bias.new_empty(bias.shape)


@register_fake("hipdiffusion::layer_norm")
def _(x, weight, bias, eps):
    return x.new_empty(x.shape)


@register_fake("hipdiffusion::layer_norm_backward")
def _(grad_out, x, weight, eps):
    return x.new_empty(x.shape), weight.new_empty(weight.shape), weight.new_empty(weight.shape)


@register_fake("hipdiffusion::geglu")
def _(x, approximate="none"):
    torch._check(x.shape[-1] % 2 == 0, lambda: f"geglu: last dimension {x.shape[-1]} is odd")
    return x.new_empty((*x.shape[:-1], x.shape[-1] // 2))


@register_fake("hipdiffusion::geglu_backward")
def _(grad_out, x, approximate="none"):
    return x.new_empty(x.shape)


@register_fake("hipdiffusion::linear")
def _(x, weight, bias=None, residual=None):
    return x.new_empty((*x.shape[:-1], weight.shape[0]))


@register_fake("hipdiffusion::conv2d")
def _(x, weight, bias=None, residual=None, stride=1, padding=0):
    n, h, w, _ = x.shape
    cout, kh, kw, _ = weight.shape
    return x.new_empty((n, (h + 2 * padding - kh) // stride + 1, (w + 2 * padding - kw) // stride + 1, cout))


# ---- autograd ----

# Each operator's formula, setup and backward, keyed by its OpOverload: what torch.library runs for it,
# and what ops.py's eager path (_EagerAutograd) runs as one autograd.Function without torch.library's
# per-call layers.
FORMULAS = {}


def _autograd(name, backward, setup):
    register_autograd(f"hipdiffusion::{name}", backward, setup_context=setup)
    FORMULAS[getattr(_ops, name).default] = (setup, backward)



def _pytorch_gradient(op, reason, function, primals, grad):
    """The gradient of `function` at `primals` by PyTorch's autograd, counted as a fallback of `op`."""
    record(op, reason)
    _, vjp = torch.func.vjp(function, *primals)
    return vjp(grad)


def _attention_gradient(grad, q, k, v, out, lse, heads, causal, scale):
    """dq, dk, dv by the engine's kernel (lse: the forward's log-sum-exp, or None to recompute it), or by
    PyTorch's autograd where the kernel does not take the tensors."""
    reason = backward_unsupported("attention", grad, q, k, v, heads=heads)
    if reason is None:
        try:
            return _ops.attention_backward(grad, q, k, v, out, heads, causal, scale, lse)
        except NotImplementedError as e:  # what only the device knows (an AMD GPU's widest head)
            reason = str(e).splitlines()[0]
    return _pytorch_gradient(
        "attention_backward", reason, lambda q, k, v: reference.attention(q, k, v, heads, causal, scale),
        (q, k, v), grad)


def _attention_setup(ctx, inputs, output):
    q, k, v, heads, causal, scale = inputs
    ctx.save_for_backward(q, k, v, output)
    ctx.args = (heads, causal, scale)


def _attention_backward(ctx, grad):
    q, k, v, out = ctx.saved_tensors
    return (*_attention_gradient(grad, q, k, v, out, None, *ctx.args), None, None, None)


_autograd("attention", _attention_backward, _attention_setup)


def _attention_with_lse_setup(ctx, inputs, output):
    q, k, v, heads, causal, scale = inputs
    out, lse = output
    ctx.mark_non_differentiable(lse)  # saved for the gradient, not a result to differentiate
    # Nor is a gradient of zeros made for it: a fill kernel of its own in every backward (0.8 us on an H200).
    ctx.set_materialize_grads(False)
    ctx.save_for_backward(q, k, v, out, lse)
    ctx.args = (heads, causal, scale)


def _attention_with_lse_backward(ctx, grad, _grad_lse):
    if grad is None:  # the output reached no loss (gradients are not materialised: the setup)
        return None, None, None, None, None, None
    q, k, v, out, lse = ctx.saved_tensors
    return (*_attention_gradient(grad, q, k, v, out, lse, *ctx.args), None, None, None)


_autograd("attention_with_lse", _attention_with_lse_backward, _attention_with_lse_setup)


def _group_norm_setup(ctx, inputs, output):
    x, weight, bias, groups, eps, silu = inputs
    ctx.save_for_backward(x, weight, bias)
    ctx.args = (groups, eps, silu)


def _group_norm_backward(ctx, grad):
    x, weight, bias = ctx.saved_tensors
    groups, eps, silu = ctx.args
    reason = backward_unsupported("group_norm", grad, x, weight, bias)
    if reason is None:
        return (*_ops.group_norm_backward(grad, x, weight, bias, groups, eps, silu), None, None, None)
    grads = _pytorch_gradient(
        "group_norm_backward", reason,
        lambda x, w, b: reference.group_norm_channels_last(x, w, b, groups, eps, silu), (x, weight, bias), grad)
    return (*grads, None, None, None)


_autograd("group_norm", _group_norm_backward, _group_norm_setup)


def _layer_norm_setup(ctx, inputs, output):
    x, weight, bias, eps = inputs
    ctx.save_for_backward(x, weight, bias)
    ctx.eps = eps


def _layer_norm_backward(ctx, grad):
    x, weight, bias = ctx.saved_tensors
    reason = backward_unsupported("layer_norm", grad, x, weight)
    if reason is None:
        return (*_ops.layer_norm_backward(grad, x, weight, ctx.eps), None)
    grads = _pytorch_gradient(
        "layer_norm_backward", reason, lambda x, w, b: reference.layer_norm(x, w, b, ctx.eps), (x, weight, bias),
        grad)
    return (*grads, None)


_autograd("layer_norm", _layer_norm_backward, _layer_norm_setup)


def _geglu_setup(ctx, inputs, output):
    x, approximate = inputs
    ctx.save_for_backward(x)
    ctx.approximate = approximate


def _geglu_backward(ctx, grad):
    (x,) = ctx.saved_tensors
    reason = backward_unsupported("geglu", grad, x)
    if reason is None:
        return _ops.geglu_backward(grad, x, ctx.approximate), None
    (dx,) = _pytorch_gradient("geglu_backward", reason, lambda x: reference.geglu(x, ctx.approximate), (x,), grad)
    return dx, None


_autograd("geglu", _geglu_backward, _geglu_setup)


# Dense products and convolutions: their gradients are products and convolutions themselves, which
# PyTorch's own (cuBLAS/cuDNN, hipBLASLt/MIOpen) compute; not a fallback.


def _linear_setup(ctx, inputs, output):
    x, weight, bias, residual = inputs
    ctx.save_for_backward(x, weight)
    ctx.has_bias, ctx.has_residual = bias is not None, residual is not None


def _linear_backward(ctx, grad):
    x, weight = ctx.saved_tensors
    dx = grad @ weight
    dw = grad.reshape(-1, grad.shape[-1]).t() @ x.reshape(-1, x.shape[-1])
    db = grad.reshape(-1, grad.shape[-1]).sum(0) if ctx.has_bias else None
    return dx, dw, db, grad if ctx.has_residual else None


_autograd("linear", _linear_backward, _linear_setup)


def _conv2d_setup(ctx, inputs, output):
    x, weight, bias, residual, stride, padding = inputs
    ctx.save_for_backward(x, weight)
    ctx.has_bias, ctx.has_residual = bias is not None, residual is not None
    ctx.stride, ctx.padding = stride, padding


def _conv2d_backward(ctx, grad):
    x, weight = ctx.saved_tensors
    to_nchw = (0, 3, 1, 2)
    dx, dw, db = torch.ops.aten.convolution_backward(
        grad.permute(to_nchw), x.permute(to_nchw), weight.permute(to_nchw),
        [weight.shape[0]] if ctx.has_bias else None, [ctx.stride] * 2, [ctx.padding] * 2, [1, 1], False, [0, 0], 1,
        [True, True, ctx.has_bias])
    to_nhwc = (0, 2, 3, 1)
    return dx.permute(to_nhwc), dw.permute(to_nhwc), db, grad if ctx.has_residual else None, None, None


_autograd("conv2d", _conv2d_backward, _conv2d_setup)
