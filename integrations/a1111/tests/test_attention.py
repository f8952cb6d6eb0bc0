"""The cross-attention optimization against PyTorch's attention on random data (A1111's stand-ins)."""

import importlib
import sys
import types

import pytest
import torch

from hipdiffusion import fallback_report


class CrossAttention(torch.nn.Module):
    """ldm's CrossAttention's parameters, as A1111's forwards use them."""

    def __init__(self, width=32, context_width=24, heads=4):
        super().__init__()
        self.heads = heads
        self.to_q = torch.nn.Linear(width, width, bias=False)
        self.to_k = torch.nn.Linear(context_width, width, bias=False)
        self.to_v = torch.nn.Linear(context_width, width, bias=False)
        self.to_out = torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.Dropout(0.0))


def expected(block, x, context):
    b, n, width = x.shape
    split = lambda t: t.view(b, -1, block.heads, width // block.heads).transpose(1, 2)
    q, k, v = split(block.to_q(x)), split(block.to_k(context)), split(block.to_v(context))
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v)
    return block.to_out(out.transpose(1, 2).reshape(b, n, width))


@pytest.fixture
def attention(webui):
    return importlib.import_module("hipdiffusion_a1111.attention")


def test_the_kernel_computes_cross_attention(webui, attention):
    torch.manual_seed(0)
    block, x, context = CrossAttention(), torch.randn(2, 40, 32), torch.randn(2, 7, 24)
    with torch.no_grad():
        torch.testing.assert_close(attention.cross_attention_forward(block, x, context), expected(block, x, context),
                                   rtol=1e-5, atol=1e-5)
    assert webui.calls == [] and fallback_report() == []


def test_self_attention_and_hypernetworks_as_a1111s(webui, attention):
    """No context: x attends to itself. Loaded hypernetworks change the context for k and v."""
    torch.manual_seed(1)
    block = CrossAttention(context_width=32)
    x = torch.randn(1, 16, 32)
    with torch.no_grad():
        torch.testing.assert_close(attention.cross_attention_forward(block, x), expected(block, x, x), rtol=1e-5, atol=1e-5)
        webui.shared.loaded_hypernetworks = ["one"]
        webui.hypernetwork.apply_hypernetworks = lambda networks, context: (context * 2, context * 2)
        torch.testing.assert_close(attention.cross_attention_forward(block, x), expected(block, x, 2 * x),
                                   rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case, reason", [
    ("mask", "an attention mask"),
    ("float64", "the CPU kernels compute in float32, not torch.float64"),
])
def test_what_the_kernel_does_not_take_runs_a1111s_attention(webui, attention, case, reason):
    block, x = CrossAttention(), torch.randn(1, 8, 32)
    mask = torch.ones(1, 8, dtype=torch.bool) if case == "mask" else None
    if case == "float64":
        block, x = block.double(), x.double()
    assert attention.cross_attention_forward(block, x, torch.randn(1, 3, 24, dtype=x.dtype), mask) == "A1111's attention"
    assert webui.calls == [("sdp", mask)]
    assert fallback_report() == [{"op": "a1111.attention", "reason": reason, "count": 1}]


def test_the_optimization_applies_to_ldm_and_sgm(webui, attention, monkeypatch):
    classes = {}
    for package in ("ldm", "sgm"):
        for leaf, name in (("attention", "CrossAttention"), ("diffusionmodules.model", "AttnBlock")):
            module = types.ModuleType(f"{package}.modules.{leaf}")
            setattr(module, name, type(name, (), {}))
            classes[(package, name)] = getattr(module, name)
            monkeypatch.setitem(sys.modules, module.__name__, module)
    for name in ("ldm", "ldm.modules", "ldm.modules.diffusionmodules", "sgm", "sgm.modules", "sgm.modules.diffusionmodules"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    optimization = attention.make_optimization(sys.modules["modules.sd_hijack_optimizations"], webui.devices)
    assert optimization.name == "hipDiffusion" and optimization.is_available()
    optimization.apply()
    for package in ("ldm", "sgm"):
        assert classes[(package, "CrossAttention")].forward is attention.cross_attention_forward
        assert classes[(package, "AttnBlock")].forward == "A1111's sdp_attnblock_forward"
    webui.devices.device = torch.device("mps")  # Apple's GPUs: no kernels
    assert not optimization.is_available()
