"""ComfyUI's attention signature through the engine's kernel (CPU, float32), and its fallbacks."""

import importlib

import pytest
import torch
import torch.nn.functional as F

from hipdiffusion import fallback_report, reset_fallback_report


def reference(q, k, v, heads, mask=None):
    """ComfyUI's attention_pytorch, written out: [B, L, heads*D] in and out."""
    b, n, width = q.shape
    d = width // heads
    split = [t.reshape(b, -1, heads, d).transpose(1, 2) for t in (q, k, v)]
    out = F.scaled_dot_product_attention(*split, attn_mask=mask)
    return out.transpose(1, 2).reshape(b, n, width)


@pytest.fixture
def attention(package):
    reset_fallback_report()
    return importlib.import_module(package.__name__ + ".attention")


def qkv(seed, b=2, n=77, m=40, heads=4, d=16, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(b, n, heads * d, generator=g, dtype=dtype), torch.randn(b, m, heads * d, generator=g, dtype=dtype),
            torch.randn(b, m, heads * d, generator=g, dtype=dtype))


def never_called(*args, **kwargs):
    raise AssertionError("the fallback ran where the kernel should have")


def test_override_computes_comfyuis_attention(attention):
    q, k, v = qkv(1)
    out = attention.override(never_called, q, k, v, 4, attn_precision=torch.float32, transformer_options={},
                             _inside_attn_wrapper=True)
    torch.testing.assert_close(out, reference(q, k, v, 4), rtol=1e-5, atol=1e-5)
    assert fallback_report() == []


def test_split_heads_in_and_out(attention):
    """skip_reshape: q, k, v as [B, heads, L, D]; skip_output_reshape: the result as [B, heads, L, D]."""
    q, k, v = qkv(2)
    split = [t.reshape(2, t.shape[1], 4, 16).transpose(1, 2) for t in (q, k, v)]
    out = attention.override(never_called, *split, 4, skip_reshape=True, skip_output_reshape=True)
    expected = reference(q, k, v, 4).reshape(2, 77, 4, 16).transpose(1, 2)
    assert out.shape == (2, 4, 77, 16)
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case, reason", [
    ("mask", "an attention mask"),
    ("float64", "the CPU kernels compute in float32, not torch.float64"),
    ("value width", "k and v shaped unlike q (a different head width for v)"),
])
def test_what_the_kernel_does_not_take_runs_comfyuis_function(attention, case, reason):
    q, k, v = qkv(3, dtype=torch.float64 if case == "float64" else torch.float32)
    mask = torch.zeros(77, 40) if case == "mask" else None
    if case == "value width":
        v = torch.randn(2, 40, 4 * 8)
    calls = []

    def comfy_function(*args, **kwargs):
        calls.append((args, kwargs))
        return "comfy's result"

    assert attention.override(comfy_function, q, k, v, 4, mask=mask, transformer_options={}) == "comfy's result"
    assert len(calls) == 1 and calls[0][1]["mask"] is mask and calls[0][0][3] == 4
    assert fallback_report() == [{"op": "comfyui.attention", "reason": reason, "count": 1}]


def test_registration_needs_comfyui(attention):
    assert attention.register() is False  # no ComfyUI here: nothing registered, nothing raised


def test_the_nodes_as_comfyui_reads_them(package):
    """Without ComfyUI's V3 API the package offers V1 classes: each node's inputs, output and function."""
    classes = package.NODE_CLASS_MAPPINGS
    assert sorted(classes) == ["HipDiffusionAttention", "HipDiffusionUNet", "HipDiffusionVAEDecode",
                               "HipDiffusionVAEEncode"]
    decode = classes["HipDiffusionVAEDecode"]
    assert decode.INPUT_TYPES() == {"required": {"samples": ("LATENT",), "vae": ("VAE",)}}
    assert decode.RETURN_TYPES == ("IMAGE",) and decode.CATEGORY == "hipdiffusion"
    assert callable(getattr(decode(), decode.FUNCTION))
    assert package.NODE_DISPLAY_NAME_MAPPINGS["HipDiffusionUNet"] == "hipDiffusion UNet"
