"""Inputs the engine's kernels do not take run PyTorch's own op, give PyTorch's answer, and are counted
with their reason; invalid input is an error whichever path would run."""

import logging
import os
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

import hipdiffusion
from hipdiffusion import ops


def reasons():
    return {(r["op"], r["reason"]): r["count"] for r in hipdiffusion.fallback_report()}


def test_float64_on_cpu_falls_back_with_reason(caplog):
    q = torch.randn(1, 4, 8, dtype=torch.float64)
    with caplog.at_level(logging.WARNING, logger="hipdiffusion"):
        out = ops.attention(q, q, q, 2)
        ops.attention(q, q, q, 2)
    torch.testing.assert_close(out, hipdiffusion.reference.attention(q, q, q, 2, False, 0.0))
    assert reasons() == {("attention", "the CPU kernels compute in float32, not torch.float64"): 2}
    assert sum("falls back" in m for m in caplog.messages) == 1  # logged once per reason


def test_float16_on_cpu_falls_back():
    x = torch.randn(2, 4, 10, dtype=torch.float16)
    torch.testing.assert_close(ops.geglu(x), hipdiffusion.reference.geglu(x, "none"))
    assert list(reasons()) == [("geglu", "the CPU kernels compute in float32, not torch.float16")]


def test_set_enabled_false_sends_everything_to_pytorch():
    hipdiffusion.set_enabled(False)
    x = torch.randn(2, 6, 8)
    w = torch.randn(8)
    torch.testing.assert_close(ops.layer_norm(x, w, None), F.layer_norm(x, (8,), w))
    assert reasons() == {("layer_norm", "disabled (HIPDIFFUSION_DISABLE=1 or set_enabled(False))"): 1}
    hipdiffusion.set_enabled(True)
    ops.layer_norm(x, w, None)
    assert reasons() == {("layer_norm", "disabled (HIPDIFFUSION_DISABLE=1 or set_enabled(False))"): 1}


@pytest.mark.parametrize("value,falls_back", [("1", True), ("0", False), ("", False)])
def test_disable_variable_is_read_at_import(value, falls_back):
    script = ("import torch, hipdiffusion; x = torch.randn(2, 8); hipdiffusion.ops.geglu(x); "
              "print(len(hipdiffusion.fallback_report()))")
    env = dict(os.environ, HIPDIFFUSION_DISABLE=value)
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ("1" if falls_back else "0")


def test_nchw_memory_falls_back_for_group_norm_and_conv():
    x = torch.randn(1, 8, 5, 5)  # contiguous NCHW, not channels_last
    w = torch.randn(4, 8, 3, 3)
    torch.testing.assert_close(ops.group_norm(x, 2), F.group_norm(x, 2))
    torch.testing.assert_close(ops.conv2d(x, w, padding=1), F.conv2d(x, w, padding=1), atol=1e-4, rtol=1e-4)
    assert {op for op, _ in reasons()} == {"group_norm", "conv2d"}
    assert all("channels_last" in reason for _, reason in reasons())


def test_mixed_dtypes_fall_back():
    x = torch.randn(3, 8)
    w = torch.randn(5, 8, dtype=torch.float64)
    torch.testing.assert_close(ops.linear(x.double(), w), F.linear(x.double(), w))
    with pytest.raises(RuntimeError):  # PyTorch's own op refuses mixed dtypes too
        ops.linear(x, w)
    assert ("linear", "tensors of several dtypes (torch.float32, torch.float64)") in reasons()


def test_meta_tensors_fall_back():
    q = torch.empty(1, 4, 8, device="meta")
    assert ops.attention(q, q, q, 2).shape == (1, 4, 8)
    assert list(reasons()) == [("attention", "no kernels for meta tensors")]


def test_gradient_of_a_fallback_is_pytorchs():
    x = torch.randn(2, 8, dtype=torch.float64, requires_grad=True)
    ops.geglu(x).sum().backward()
    x2 = x.detach().clone().requires_grad_(True)
    hipdiffusion.reference.geglu(x2, "none").sum().backward()
    torch.testing.assert_close(x.grad, x2.grad)


@pytest.mark.parametrize("enabled", [True, False])
def test_invalid_input_is_an_error_on_both_paths(enabled):
    hipdiffusion.set_enabled(enabled)
    q = torch.randn(1, 4, 9)
    with pytest.raises(ValueError, match="does not split into 2 heads"):
        ops.attention(q, q, q, 2)
    with pytest.raises(ValueError, match="do not split into 3 groups"):
        ops.group_norm(torch.randn(1, 4, 2, 2), 3)
    with pytest.raises(ValueError, match="even dimension"):
        ops.geglu(torch.randn(2, 5))
    with pytest.raises(ValueError, match="does not fit weight"):
        ops.linear(torch.randn(2, 5), torch.randn(3, 4))
    with pytest.raises(ValueError, match="scale must be positive"):
        ops.attention(torch.randn(1, 4, 8), torch.randn(1, 4, 8), torch.randn(1, 4, 8), 2, scale=-1.0)
    assert hipdiffusion.fallback_report() == []  # an error is not a fallback


def test_operator_called_directly_reports_engine_errors():
    q = torch.randn(1, 4, 8)
    k = torch.randn(1, 5, 6)
    with pytest.raises(ValueError, match="hipdiffusion::attention: attention: key has shape"):
        torch.ops.hipdiffusion.attention(q, k, k, 2)
    with pytest.raises(NotImplementedError, match="Double tensors have no kernels"):
        torch.ops.hipdiffusion.attention(q.double(), q.double(), q.double(), 2)
    with pytest.raises(ValueError, match="approximate must be"):
        torch.ops.hipdiffusion.geglu(torch.randn(2, 4), "erf")
