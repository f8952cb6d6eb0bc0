"""The extension's modules imported as the web UI imports them (the extension's folder on sys.path),
against stand-ins for the web UI's own modules (CI has no AUTOMATIC1111 or Forge):
tools/integration/a1111.sh runs the extension inside AUTOMATIC1111 itself."""

import sys
import types
from pathlib import Path

import pytest
import torch

EXTENSION = Path(__file__).resolve().parents[1]
REPOSITORY = EXTENSION.parents[1]
sys.path.insert(0, str(EXTENSION))
sys.path.insert(0, str(REPOSITORY / "integrations" / "testing"))  # ldm_stand_ins


class SdUnet(torch.nn.Module):  # modules.sd_unet's, as A1111 has them
    def activate(self):
        pass

    def deactivate(self):
        pass


class SdUnetOption:
    model_name = None
    label = None


class SdOptimization:
    name = None
    label = None
    cmd_opt = None
    priority = 0

    def undo(self):
        pass


def _module(name: str, **attributes) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__dict__.update(attributes)
    return module


@pytest.fixture
def webui(monkeypatch):
    """A1111's modules as the extension uses them; tests set what they need (shared.sd_model, ...).
    `calls` records what A1111's own paths were asked to compute."""
    calls = []
    shared = _module("modules.shared", loaded_hypernetworks=[], device=torch.device("cpu"),
                     opts=types.SimpleNamespace(lora_functional=False, upcast_attn=False), sd_model=None)
    devices = _module("modules.devices", device=torch.device("cpu"), dtype_unet=torch.float32)
    hypernetwork = _module("modules.hypernetworks.hypernetwork",
                           apply_hypernetworks=lambda networks, context: (context, context))

    def a1111_sdp(self, x, context=None, mask=None, **kwargs):
        calls.append(("sdp", mask))
        return "A1111's attention"

    def original_forward(model, x, timesteps=None, context=None, *args, **kwargs):
        calls.append(("unet", kwargs))
        return "A1111's UNet"

    callbacks = {}
    script_callbacks = _module("modules.script_callbacks", **{
        f"on_{kind}": (lambda kind: lambda callback: callbacks.setdefault(kind, []).append(callback))(kind)
        for kind in ("list_optimizers", "list_unets", "ui_settings")})
    stand_ins = {
        "modules": _module("modules"),
        "modules.shared": shared,
        "modules.devices": devices,
        "modules.sd_unet": _module("modules.sd_unet", SdUnet=SdUnet, SdUnetOption=SdUnetOption),
        "modules.sd_hijack": _module("modules.sd_hijack", ldm_original_forward=original_forward,
                                     sgm_original_forward=original_forward),
        "modules.sd_hijack_optimizations": _module("modules.sd_hijack_optimizations", SdOptimization=SdOptimization,
                                                   scaled_dot_product_attention_forward=a1111_sdp,
                                                   sdp_attnblock_forward="A1111's sdp_attnblock_forward"),
        "modules.hypernetworks": _module("modules.hypernetworks", hypernetwork=hypernetwork),
        "modules.hypernetworks.hypernetwork": hypernetwork,
        "modules.script_callbacks": script_callbacks,
    }
    for name, module in stand_ins.items():
        monkeypatch.setitem(sys.modules, name, module)
        parent, _, child = name.rpartition(".")
        if parent:
            setattr(stand_ins[parent], child, module)
    for name in [n for n in sys.modules if n.startswith("hipdiffusion_a1111.")]:
        monkeypatch.delitem(sys.modules, name)  # imported afresh against these stand-ins
    from hipdiffusion import reset_fallback_report

    reset_fallback_report()
    return types.SimpleNamespace(shared=shared, devices=devices, hypernetwork=hypernetwork, calls=calls,
                                 callbacks=callbacks)
