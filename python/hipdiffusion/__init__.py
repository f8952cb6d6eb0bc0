"""hipDiffusion's Stable Diffusion kernels as PyTorch ops.

    import hipdiffusion
    y = hipdiffusion.ops.attention(q, k, v, heads=8)     # q, k, v: [B, L, heads * D]

Every op runs the engine's kernel where the inputs are supported (the CPU reference in float32; the GPU
kernels in float16/bfloat16 when the package was built with them) and PyTorch's own op otherwise;
`fallback_report()` lists what fell back and why. HIPDIFFUSION_DISABLE=1 (or set_enabled(False)) sends
everything to PyTorch.
"""

from . import _library, ops
from .fallback import fallback_report, reset_fallback_report, set_enabled

__all__ = ["ops", "fallback_report", "reset_fallback_report", "set_enabled", "gpu_build", "diffusers"]


def __getattr__(name):
    # hipdiffusion.diffusers imports diffusers: only when asked for.
    if name == "diffusers":
        import importlib

        return importlib.import_module(".diffusers", __name__)
    raise AttributeError(f"module 'hipdiffusion' has no attribute {name!r}")


def gpu_build() -> bool:
    """Whether this build has the engine's GPU kernels (CUDA or ROCm)."""
    return _library.GPU_BUILD
