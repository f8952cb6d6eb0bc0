"""Forge's route on stand-ins for its KModel and UnetPatcher (CI has no Forge): the tiny SD1.x UNet held as
Forge's IntegratedUNet2DConditionModel holds it, against diffusers' UNet2DConditionModel."""

import importlib
import json
import types

import pytest
import torch

from hipdiffusion import fallback_report, reset_fallback_report
from ldm_stand_ins import FIXTURES, EpsSampling, diffusers_or_skip, ldm_unet


class KModel:
    def __init__(self, diffusion_model):
        self.diffusion_model = diffusion_model
        self.predictor = EpsSampling()
        self.storage_dtype = self.computation_dtype = torch.float32
        self.applied = []

    def apply_model(self, x, t, **c):  # Forge's own path: what a fallback runs
        self.applied.append(c)
        return "Forge's apply_model"


class UnetPatcher:
    def __init__(self, model, model_options=None):
        self.model, self.model_options = model, dict(model_options or {})
        self.replaced = []

    def clone(self):
        return UnetPatcher(self.model, self.model_options)

    def set_model_unet_function_wrapper(self, wrapper):
        self.model_options["model_function_wrapper"] = wrapper

    def set_model_replace_all(self, patch, target="attn1"):
        self.replaced.append((patch, target))


@pytest.fixture
def forge():
    reset_fallback_report()
    return importlib.import_module("hipdiffusion_a1111.forge")


@pytest.fixture
def kmodel():
    diffusers = diffusers_or_skip()
    config = json.loads((FIXTURES / "tiny_sd1" / "unet" / "config.json").read_text())
    model = ldm_unet(config, "IntegratedUNet2DConditionModel")
    model.config = {"dims": 2, "num_classes": None}
    reference = diffusers.UNet2DConditionModel.from_pretrained(str(FIXTURES / "tiny_sd1" / "unet"),
                                                               torch_dtype=torch.float32).eval()
    return KModel(model), reference


def test_whole_unet_computes_forges_step(forge, kmodel):
    base, reference = kmodel
    unet = forge.patch(UnetPatcher(base), "Whole UNet")
    function = unet.model_options["model_function_wrapper"]
    g = torch.Generator().manual_seed(4)
    x, sigma, context = torch.randn(2, 4, 8, 8, generator=g) * 3, torch.tensor([2.5, 1.5]), torch.randn(2, 77, 32, generator=g)
    out = function(base.apply_model, {"input": x, "timestep": sigma, "c": {"c_crossattn": context, "transformer_options": {}}})
    with torch.no_grad():
        eps = reference(x / (sigma.reshape(-1, 1, 1, 1) ** 2 + 1) ** 0.5, sigma * 37.5, encoder_hidden_states=context).sample
    torch.testing.assert_close(out, x - eps * sigma.reshape(-1, 1, 1, 1), rtol=1e-4, atol=1e-4)
    assert function.calls == 1 and base.applied == [] and fallback_report() == []


def test_weights_stored_in_another_dtype_run_forges_own(forge, kmodel):
    base, _ = kmodel
    base.storage_dtype = torch.float8_e4m3fn  # Forge's fp8 storage, cast per layer as it runs
    function = forge.ForgeUnetFunction(base)
    c = {"c_crossattn": torch.randn(1, 77, 32)}
    assert function(base.apply_model, {"input": torch.randn(1, 4, 8, 8), "timestep": torch.tensor([1.0]), "c": c}) \
        == "Forge's apply_model"
    assert fallback_report() == [{"op": "forge.unet",
                                  "reason": "weights stored in torch.float8_e4m3fn and computed in torch.float32", "count": 1}]


def test_attention_patch_against_pytorch(forge):
    torch.manual_seed(2)
    q, k, v = torch.randn(2, 20, 32), torch.randn(2, 6, 32), torch.randn(2, 6, 32)
    split = lambda t: t.view(2, -1, 4, 8).transpose(1, 2)
    reference = torch.nn.functional.scaled_dot_product_attention(split(q), split(k), split(v)).transpose(1, 2).reshape(2, 20, 32)
    torch.testing.assert_close(forge.attention_patch(q, k, v, {"n_heads": 4}), reference, rtol=1e-5, atol=1e-5)
    patched = forge.patch(UnetPatcher(None), "Attention")
    assert patched.replaced == [(forge.attention_patch, "attn1"), (forge.attention_patch, "attn2")]


def test_the_route_says_why_it_cannot_work(forge, kmodel):
    assert forge.route_unsupported(UnetPatcher(kmodel[0])) is None
    flux = types.SimpleNamespace(diffusion_model=type("IntegratedFluxTransformer2DModel", (), {})())
    assert forge.route_unsupported(UnetPatcher(flux)) == \
        "a IntegratedFluxTransformer2DModel diffusion model (the engine runs Stable Diffusion's UNet)"
    assert forge.route_unsupported(None) == "no forge_objects.unet (a Forge without its patcher, or A1111)"
    assert forge.route_unsupported(types.SimpleNamespace(clone=lambda: None)) == \
        "this Forge's UnetPatcher has no set_model_unet_function_wrapper()"
    with pytest.raises(ValueError, match="one of Off, Attention, Whole UNet"):
        forge.patch(UnetPatcher(None), "everything")
    original = UnetPatcher(None)
    assert forge.patch(original, "Off") is not original  # a clone, even when nothing is patched
