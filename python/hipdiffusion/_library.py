"""Loads the compiled operators (torch.ops.hipdiffusion.*) and says what the build holds."""

import pathlib

import torch

_here = pathlib.Path(__file__).resolve().parent
_candidates = sorted(_here.glob("_ops*.so"))
if not _candidates:
    raise ImportError(
        f"hipdiffusion: the compiled operators (_ops.so) are missing from {_here}; "
        "install the package with `pip install --no-build-isolation .` from the repository root"
    )
torch.ops.load_library(str(_candidates[0]))

# A GPU build registers its kernels under PyTorch's CUDA dispatch key (ROCm builds of PyTorch too).
GPU_BUILD: bool = torch._C._dispatch_has_kernel_for_dispatch_key("hipdiffusion::attention", "CUDA")
