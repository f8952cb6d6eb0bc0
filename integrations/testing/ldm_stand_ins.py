"""Stand-ins for the UIs' model objects (ComfyUI, AUTOMATIC1111, Forge hold Stable Diffusion by the same LDM
names and nesting): the test fixtures' tiny SD1.x model held as they hold it. Shared by the integrations'
tests; their conftest.py puts this folder on sys.path."""

import os
from pathlib import Path

import pytest
import torch

FIXTURES = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "models"


def diffusers_or_skip():
    if os.environ.get("HIPDIFFUSION_TESTS_NEED_DIFFUSERS"):
        import diffusers
        return diffusers
    return pytest.importorskip("diffusers")


def ldm_module(class_name: str, prefix: str, norm_path: list, groups: int) -> torch.nn.Module:
    """A module named `class_name` holding the tiny SD1.x single file's tensors under `prefix`, by their
    LDM names, nested as the UIs nest them; the module at `norm_path` is a GroupNorm of `groups` groups
    (the UIs' models are read for their group count)."""
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


def ldm_unet(config: dict, class_name: str = "UNetModel") -> torch.nn.Module:
    """The tiny SD1.x UNet (its diffusers `config`) as the UIs' LDM UNetModel holds it, with the
    attributes read for the engine's configuration."""
    model = ldm_module(class_name, "model.diffusion_model.", ["out", "0"], config["norm_num_groups"])
    base = config["block_out_channels"][0]
    model.model_channels = base
    model.channel_mult = [c // base for c in config["block_out_channels"]]
    model.num_heads, model.num_head_channels = config["attention_head_dim"], -1
    return model


class EpsSampling:
    """ComfyUI's EPS model sampling, Forge's EPS predictor (sigma_data 1), with a timestep map of its own."""

    def calculate_input(self, sigma, x):
        return x / (sigma.reshape(-1, 1, 1, 1) ** 2 + 1) ** 0.5

    def timestep(self, sigma):
        return sigma * 37.5

    def calculate_denoised(self, sigma, output, x):
        return x - output * sigma.reshape(-1, 1, 1, 1)
