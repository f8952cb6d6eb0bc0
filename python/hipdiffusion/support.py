"""Whether the engine's kernels take a set of tensors, and if not, why (the reason that
fallback_report() counts). Invalid input is not a fallback: the ops raise for it either way."""

from typing import Optional

import torch

from . import _library
from .fallback import disabled

_GPU_DTYPES = (torch.float16, torch.bfloat16)


def kernel_unsupported(*tensors: torch.Tensor) -> Optional[str]:
    """None when the engine's kernels take these tensors; else the reason they do not."""
    if disabled():
        return "disabled (HIPDIFFUSION_DISABLE=1 or set_enabled(False))"
    # A plain loop: this runs on every op call, and generator expressions cost microseconds here.
    first = tensors[0]
    device, dtype = first.device, first.dtype
    for t in tensors:
        if t.device != device:
            return "tensors on several devices"
        if t.dtype != dtype:
            return "tensors of several dtypes (" + ", ".join(sorted({str(t.dtype) for t in tensors})) + ")"
        if t.dim() > 6:
            return "a tensor of rank above 6"
    return placement_unsupported(device, dtype)


def placement_unsupported(device: torch.device, dtype: torch.dtype) -> Optional[str]:
    """None when the engine computes in `dtype` on `device` (float32 on the CPU, float16 or bfloat16 on
    a GPU of this build); else the reason it does not."""
    kind = device.type
    if kind == "cpu":
        if dtype != torch.float32:
            return f"the CPU kernels compute in float32, not {dtype}"
    elif kind == "cuda":
        if not _library.GPU_BUILD:
            return "this build has no GPU kernels (reinstall with -C cmake.define.HD_CUDA=ON or HD_HIP=ON)"
        if dtype not in _GPU_DTYPES:
            return f"the GPU kernels take float16 or bfloat16, not {dtype}"
    else:
        return f"no kernels for {kind} tensors"
    return None


# The widest attention head whose gradient has a GPU kernel (src/ops/gpu/gpu_ops.h, kMaxFlashHeadDim).
_MAX_GRADIENT_HEAD = 160


def backward_unsupported(op: str, *tensors: torch.Tensor, heads: int = 1) -> Optional[str]:
    """None when the engine has a gradient kernel of `op` for these tensors (every op's on the CPU; on a
    GPU attention's takes heads of a multiple of 8 up to 160, on 16-byte-aligned memory)."""
    reason = kernel_unsupported(*tensors)
    if reason is None and op == "attention" and tensors[0].device.type != "cpu":
        head = tensors[1].shape[-1] // heads
        if head % 8 != 0 or head > _MAX_GRADIENT_HEAD:
            return f"attention gradient on the GPU for heads of {head} (a multiple of 8 up to {_MAX_GRADIENT_HEAD})"
        if any(t.data_ptr() % 16 != 0 for t in tensors):
            return "attention gradient on the GPU for memory off a 16-byte boundary"
    return reason


def channels_last_permutation(x: torch.Tensor) -> list[int]:
    """The permutation that views an [N, C, *spatial] tensor as channels last, [N, *spatial, C]."""
    return [0, *range(2, x.dim()), 1]


def channels_first_permutation(rank: int) -> list[int]:
    """The inverse of channels_last_permutation: [N, *spatial, C] back to [N, C, *spatial]."""
    return [0, rank - 1, *range(1, rank - 1)]
