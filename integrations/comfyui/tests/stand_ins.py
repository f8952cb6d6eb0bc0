"""Stand-ins for ComfyUI's model objects: the test fixtures' tiny SD1.x model held as ComfyUI holds it."""

import os
from pathlib import Path

import pytest
import torch

FIXTURES = Path(__file__).resolve().parents[3] / "tests" / "fixtures" / "models"


def diffusers_or_skip():
    if os.environ.get("HIPDIFFUSION_TESTS_NEED_DIFFUSERS"):
        import diffusers
        return diffusers
    return pytest.importorskip("diffusers")


def ldm_module(class_name: str, prefix: str, norm_path: list, groups: int) -> torch.nn.Module:
    """A module named `class_name` holding the tiny SD1.x single file's tensors under `prefix`, by their
    LDM names, nested as ComfyUI nests them; the module at `norm_path` is a GroupNorm of `groups` groups
    (ComfyUI's models are read for their group count)."""
    from safetensors.torch import load_file

    model = type(class_name, (torch.nn.Module,), {})()
    for name, tensor in sorted(load_file(str(FIXTURES / "tiny_sd1.safetensors")).items()):
        if not name.startswith(prefix):
            continue
        *path, leaf = name[len(prefix):].split(".")
        module = model
        for i, part in enumerate(path):
            if not hasattr(module, part):
                norm = path[: i + 1] == norm_path
                module.add_module(part, torch.nn.GroupNorm(groups, tensor.shape[0]) if norm else torch.nn.Module())
            module = getattr(module, part)
        if isinstance(module, torch.nn.GroupNorm):
            getattr(module, leaf).data = tensor.float()
        else:
            module.register_parameter(leaf, torch.nn.Parameter(tensor.float(), requires_grad=False))
    return model
