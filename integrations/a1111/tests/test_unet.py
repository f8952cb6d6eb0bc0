"""The "SD Unet" option on the tiny SD1.x UNet held as A1111's ldm UNetModel holds it (A1111's
stand-ins), against diffusers' UNet2DConditionModel on the same weights."""

import importlib
import json
import sys
import types

import pytest
import torch

from hipdiffusion import fallback_report
from ldm_stand_ins import FIXTURES, diffusers_or_skip, ldm_unet


@pytest.fixture
def setup(webui):
    diffusers = diffusers_or_skip()
    config = json.loads((FIXTURES / "tiny_sd1" / "unet" / "config.json").read_text())
    reference = diffusers.UNet2DConditionModel.from_pretrained(str(FIXTURES / "tiny_sd1" / "unet"),
                                                               torch_dtype=torch.float32).eval()
    model = ldm_unet(config)
    webui.shared.sd_model = types.SimpleNamespace(lowvram=False, model=types.SimpleNamespace(diffusion_model=model))
    unet_module = importlib.import_module("hipdiffusion_a1111.unet")
    unet = unet_module.HipDiffusionUnetOption().create_unet()
    unet.activate()
    return unet, reference, model


def inputs(seed: int):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(2, 4, 8, 8, generator=g), torch.tensor([999.0, 420.0]), torch.randn(2, 77, 32, generator=g)


def expected(reference, x, t, context):
    with torch.no_grad():
        return reference(x, t, encoder_hidden_states=context).sample


def test_the_engine_computes_a1111s_unet_call(webui, setup):
    unet, reference, model = setup
    x, t, context = inputs(1)
    torch.testing.assert_close(unet(x, t, context), expected(reference, x, t, context), rtol=1e-4, atol=1e-4)
    # A1111's compvis samplers pass integer timesteps.
    torch.testing.assert_close(unet(x, t.long(), context), expected(reference, x, t, context), rtol=1e-4, atol=1e-4)
    assert unet.calls == 2 and webui.calls == [] and fallback_report() == []


def test_lora_weights_are_brought_in_before_each_step(webui, setup, monkeypatch):
    """The Lora extension changes a layer's weights in place when that layer's forward runs; the engine
    runs none, so the option runs network_apply_weights over the layers itself (the layer types A1111
    hooks: here the stand-in's one GroupNorm, the output norm; its containers have no weight)."""
    unet, reference, model = setup
    x, t, context = inputs(2)
    unet(x, t, context)
    out_norm = getattr(model.out, "0")
    applied = []

    def network_apply_weights(module):
        module.weight  # A1111's reads the layer's weight: a module without one raises
        applied.append(module)
        if len(applied) == 1:
            with torch.no_grad():
                module.bias += 0.5  # in place, as A1111's Lora does (the version counter moves)

    monkeypatch.setitem(sys.modules, "networks", types.SimpleNamespace(
        network_apply_weights=network_apply_weights, loaded_networks=["a lora"]))
    after = unet(x, t, context)
    with torch.no_grad():
        reference.conv_norm_out.bias += 0.5
    torch.testing.assert_close(after, expected(reference, x, t, context), rtol=1e-4, atol=1e-4)
    assert applied == [out_norm] and unet.calls == 2


@pytest.mark.parametrize("case, reason", [
    ("hypernetwork", "hypernetworks (applied inside A1111's attention)"),
    ("lowvram", "low-VRAM mode (--lowvram/--medvram move the weights block by block)"),
    ("kwarg", "inputs the engine has no argument for: control"),
    ("kwarg beside y", "inputs the engine has no argument for: control, positional arguments"),
    ("lora_functional", "Lora applied functionally (the lora_functional option)"),
    ("float64", "the CPU kernels compute in float32, not torch.float64"),
])
def test_what_the_engine_does_not_take_runs_a1111s_forward(webui, setup, monkeypatch, case, reason):
    unet, _, model = setup
    x, t, context = inputs(3)
    args, kwargs = (), {}
    if case == "hypernetwork":
        webui.shared.loaded_hypernetworks = ["one"]
    elif case == "lowvram":
        webui.shared.sd_model.lowvram = True
    elif case == "kwarg":
        kwargs = {"control": [torch.zeros(1)]}
    elif case == "kwarg beside y":
        args, kwargs = (torch.zeros(1),), {"control": [torch.zeros(1)], "y": torch.zeros(3, 4)}
    elif case == "lora_functional":
        webui.shared.opts.lora_functional = True
        monkeypatch.setitem(sys.modules, "networks", types.SimpleNamespace(
            network_apply_weights=lambda m: None, loaded_networks=["a lora"]))
    elif case == "float64":
        model.to(torch.float64)
    assert unet(x, t, context, *args, **kwargs) == "A1111's UNet"
    assert webui.calls == [("unet", kwargs)] and unet.calls == 0
    assert fallback_report() == [{"op": "a1111.unet", "reason": reason, "count": 1}]
