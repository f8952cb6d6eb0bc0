"""The UNet wrapper on a stand-in for ComfyUI's model (CI has no ComfyUI): a module named UNetModel
holding the tiny SD1.x pipeline's UNet under its single-file (LDM) names, as ComfyUI's holds them, and a
model sampling of ComfyUI's form. Checked against diffusers' UNet2DConditionModel on the same weights,
with the wrapper's arithmetic written out: denoised = x - sigma * eps(x / sqrt(sigma^2 + 1), t(sigma))."""

import importlib
import json
import sys
import types

import pytest
import torch

from hipdiffusion import fallback_report, held, reset_fallback_report
from ldm_stand_ins import FIXTURES, EpsSampling, diffusers_or_skip, ldm_unet


class BaseModel:
    """comfy.model_base.BaseModel's part the wrapper uses."""

    def __init__(self, diffusion_model):
        self.diffusion_model = diffusion_model
        self.model_config = types.SimpleNamespace(unet_config={"num_classes": None})
        self.manual_cast_dtype = None
        self.model_sampling = EpsSampling()
        self.applied = []

    def process_timestep(self, timestep, **kwargs):
        return timestep

    def apply_model(self, x, t, **c):  # ComfyUI's own path: what a fallback runs
        self.applied.append(c)
        return "comfy's apply_model"


@pytest.fixture(scope="module")
def comfy_stand_in():
    """comfy.model_base.BaseModel for the wrapper's check that the model keeps BaseModel's timesteps."""
    comfy = types.ModuleType("comfy")
    comfy.model_base = types.ModuleType("comfy.model_base")
    comfy.model_base.BaseModel = BaseModel
    saved = {k: sys.modules.get(k) for k in ("comfy", "comfy.model_base")}
    sys.modules.update({"comfy": comfy, "comfy.model_base": comfy.model_base})
    yield
    for k, v in saved.items():
        if v is None:
            sys.modules.pop(k, None)
        else:
            sys.modules[k] = v


@pytest.fixture
def setup(package, comfy_stand_in):
    diffusers = diffusers_or_skip()
    reset_fallback_report()
    unet_module = importlib.import_module(package.__name__ + ".unet")
    config = json.loads((FIXTURES / "tiny_sd1" / "unet" / "config.json").read_text())
    reference = diffusers.UNet2DConditionModel.from_pretrained(str(FIXTURES / "tiny_sd1" / "unet"),
                                                               torch_dtype=torch.float32).eval()
    base = BaseModel(ldm_unet(config))
    return unet_module, reference, base


def inputs(seed: int):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(2, 4, 8, 8, generator=g) * 3
    sigma = torch.tensor([2.5, 2.5])
    context = torch.randn(2, 77, 32, generator=g)
    return x, sigma, context


def expected(reference, x, sigma, context):
    with torch.no_grad():
        eps = reference(x / (sigma.reshape(-1, 1, 1, 1) ** 2 + 1) ** 0.5, sigma * 37.5,
                        encoder_hidden_states=context).sample
    return x - eps * sigma.reshape(-1, 1, 1, 1)


def test_engine_computes_comfyuis_step(setup):
    unet_module, reference, base = setup
    function = unet_module.EngineUnetFunction(base)
    x, sigma, context = inputs(5)
    out = function(None, {"input": x, "timestep": sigma, "c": {"c_crossattn": context, "transformer_options": {}}})
    torch.testing.assert_close(out, expected(reference, x, sigma, context), rtol=1e-4, atol=1e-4)
    assert function.calls == 1 and base.applied == [] and fallback_report() == []
    # The convolution kernels were put in channels_last memory in place: the engine views them.
    assert getattr(getattr(base.diffusion_model.input_blocks, "0"), "0").weight.is_contiguous(memory_format=torch.channels_last)


def test_replaced_weights_are_seen(setup):
    """ComfyUI applies a LoRA by replacing parameters: the next call builds over the new ones."""
    unet_module, reference, base = setup
    function = unet_module.EngineUnetFunction(base)
    x, sigma, context = inputs(6)
    args = {"input": x, "timestep": sigma, "c": {"c_crossattn": context}}
    before = function(None, args)
    out_conv = getattr(base.diffusion_model.out, "2")
    out_conv.bias = torch.nn.Parameter(out_conv.bias.detach() + 1.0, requires_grad=False)
    after = function(None, args)
    torch.testing.assert_close(after, before - sigma.reshape(-1, 1, 1, 1), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("extra, reason", [
    ({"control": {"output": []}}, "ControlNet residuals"),
    ({"transformer_options": {"patches": {"attn1_patch": [print]}}},
     "transformer_options['patches'] (patches the diffusion model)"),
    ({"guidance": torch.ones(2)}, "conditionings the engine has no input for: guidance"),
])
def test_what_the_engine_does_not_take_runs_comfyuis_apply_model(setup, extra, reason):
    unet_module, _, base = setup
    function = unet_module.EngineUnetFunction(base)
    x, sigma, context = inputs(7)
    c = {"c_crossattn": context, **extra}
    assert function(None, {"input": x, "timestep": sigma, "c": c}) == "comfy's apply_model"
    assert base.applied == [c] and function.calls == 0
    assert fallback_report() == [{"op": "comfyui.unet", "reason": reason, "count": 1}]


def test_a_wrapper_already_there_gets_the_engine_as_its_apply_model(setup):
    unet_module, reference, base = setup
    seen = []

    def previous(apply_model, args):
        seen.append(args["timestep"])
        return apply_model(args["input"], args["timestep"], **args["c"]) * 2

    function = unet_module.EngineUnetFunction(base, previous)
    x, sigma, context = inputs(8)
    out = function(None, {"input": x, "timestep": sigma, "c": {"c_crossattn": context}})
    torch.testing.assert_close(out, 2 * expected(reference, x, sigma, context), rtol=1e-4, atol=1e-4)
    assert len(seen) == 1 and function.calls == 1


def test_config_reads_heads_and_groups(setup):
    _, _, base = setup
    assert json.loads(held.ldm_unet_config_json(base.diffusion_model)) == {
        "attention_head_dim": [4, 4], "addition_time_embed_dim": 256, "norm_num_groups": 8}
    sdxl_like = types.SimpleNamespace(model_channels=320, channel_mult=[1, 2, 4], num_heads=-1, num_head_channels=64,
                                      modules=lambda: [])
    assert json.loads(held.ldm_unet_config_json(sdxl_like))["attention_head_dim"] == [5, 10, 20]


def test_after_a_run_the_next_one_sees_new_weights(setup):
    """With ComfyUI's cleanup callback the parameter list is walked once per sampling run; release() (the
    callback) ends the run, and the next call builds over the weights as they are then."""
    unet_module, _, base = setup
    function = unet_module.EngineUnetFunction(base)
    function.release_on_cleanup = True
    x, sigma, context = inputs(9)
    args = {"input": x, "timestep": sigma, "c": {"c_crossattn": context}}
    before = function(None, args)
    out_conv = getattr(base.diffusion_model.out, "2")
    out_conv.bias = torch.nn.Parameter(out_conv.bias.detach() - 0.5, requires_grad=False)
    function.release()
    after = function(None, args)
    torch.testing.assert_close(after, before + 0.5 * sigma.reshape(-1, 1, 1, 1), rtol=1e-4, atol=1e-4)


def test_weights_the_engine_cannot_view_run_comfyuis_apply_model(setup):
    unet_module, _, base = setup
    base.diffusion_model.to(torch.float64)  # no kernels for float64
    function = unet_module.EngineUnetFunction(base)
    x, sigma, context = inputs(10)
    for _ in range(2):
        assert function(None, {"input": x, "timestep": sigma, "c": {"c_crossattn": context}}) == "comfy's apply_model"
    assert fallback_report() == [{"op": "comfyui.unet", "reason": "the CPU kernels compute in float32, not torch.float64",
                                  "count": 2}]
