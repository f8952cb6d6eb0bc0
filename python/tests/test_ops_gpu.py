"""The ops on a GPU (f16 and bf16) against PyTorch's own on the same inputs, on PyTorch's current stream,
inside torch.compile(fullgraph=True) with Inductor and inside a captured CUDA graph. Skipped without a
GPU or without the package's GPU kernels."""

import pytest
import torch
import torch.nn.functional as F

import hipdiffusion
from hipdiffusion import ops

pytestmark = pytest.mark.skipif(not (torch.cuda.is_available() and hipdiffusion.gpu_build()),
                                reason="needs a GPU and a GPU build of the package")

DTYPES = [torch.float16, torch.bfloat16]
# Relative error allowed against PyTorch's op computed in float32 from the same rounded inputs.
TOLERANCE = {torch.float16: 4e-3, torch.bfloat16: 2.5e-2}


def rand(*shape, dtype, grad=False):
    return torch.randn(*shape, device="cuda", dtype=dtype).requires_grad_(grad)


def assert_close_to(got, want_f32, dtype):
    err = (got.float() - want_f32).norm() / want_f32.norm().clamp_min(1e-12)
    assert err < TOLERANCE[dtype], f"relative error {err:.2e}"


def assert_kernels_ran():
    assert [r for r in hipdiffusion.fallback_report() if not r["op"].endswith("_backward")] == []


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(2, 4096, 4096, 8, 40), (2, 1024, 77, 8, 80), (1, 256, 256, 5, 64),
                                   (2, 64, 77, 20, 64), (1, 100, 100, 2, 4), (1, 64, 64, 1, 512)])
def test_attention(dtype, shape):
    b, lq, lk, heads, d = shape
    q, k, v = rand(b, lq, heads * d, dtype=dtype), rand(b, lk, heads * d, dtype=dtype), rand(b, lk, heads * d, dtype=dtype)
    want = hipdiffusion.reference.attention(q.float(), k.float(), v.float(), heads, False, 0.0)
    assert_close_to(ops.attention(q, k, v, heads), want, dtype)
    assert_kernels_ran()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("silu", [False, True])
def test_group_norm(dtype, silu):
    x = rand(2, 320, 64, 64, dtype=dtype).to(memory_format=torch.channels_last) * 2 + 0.5
    w, b = rand(320, dtype=dtype), rand(320, dtype=dtype)
    want = F.group_norm(x.float(), 32, w.float(), b.float(), 1e-5)
    want = F.silu(want) if silu else want
    got = ops.group_norm(x, 32, w, b, 1e-5, silu=silu)
    assert got.is_contiguous(memory_format=torch.channels_last)
    assert_close_to(got, want, dtype)
    assert_kernels_ran()


@pytest.mark.parametrize("dtype", DTYPES)
def test_layer_norm_geglu_linear(dtype):
    x = rand(2, 1024, 320, dtype=dtype)
    w, b = rand(320, dtype=dtype), rand(320, dtype=dtype)
    assert_close_to(ops.layer_norm(x, w, b), F.layer_norm(x.float(), (320,), w.float(), b.float()), dtype)
    proj, bias = rand(2560, 320, dtype=dtype) * 0.05, rand(2560, dtype=dtype)
    residual = rand(2, 1024, 2560, dtype=dtype)
    assert_close_to(ops.linear(x, proj, bias, residual), F.linear(x.float(), proj.float(), bias.float()) + residual.float(), dtype)
    h = rand(2, 1024, 2560, dtype=dtype)
    value, gate = h.float().chunk(2, -1)
    assert_close_to(ops.geglu(h), value * F.gelu(gate), dtype)
    assert_kernels_ran()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("cin,cout,size,stride", [(320, 320, 64, 1), (4, 320, 64, 1), (640, 640, 32, 2), (320, 640, 32, 1)])
def test_conv2d(dtype, cin, cout, size, stride):
    x = rand(2, cin, size, size, dtype=dtype).to(memory_format=torch.channels_last)
    w = (rand(cout, cin, 3, 3, dtype=dtype) * 0.05).to(memory_format=torch.channels_last)
    b = rand(cout, dtype=dtype)
    got = ops.conv2d(x, w, b, stride, 1)
    assert_close_to(got, F.conv2d(x.float(), w.float(), b.float(), stride, 1), dtype)
    assert_kernels_ran()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("tokens,context,heads,causal", [(256, 256, 8, False), (300, 77, 5, False), (128, 128, 2, True)])
def test_attention_gradient_is_ours_and_right(dtype, tokens, context, heads, causal):
    """Attention's gradient runs our kernel (attention_backward.cu): nothing falls back, and the
    gradients match PyTorch's autograd in float32 on the same rounded inputs (widths 40, 64 and 160)."""
    width = 320
    q = rand(1, tokens, width, dtype=dtype, grad=True)
    k, v = (rand(1, context, width, dtype=dtype, grad=True) for _ in range(2))
    out = ops.attention(q, k, v, heads, causal=causal)
    # The forward kept each row's log-sum-exp for the gradient kernel.
    assert out.grad_fn.formula_backward.__name__ == "_attention_with_lse_backward"
    assert len(out.grad_fn.saved_tensors) == 5
    upstream = torch.randn_like(out)
    got = torch.autograd.grad(out, (q, k, v), upstream)
    q2, k2, v2 = (t.detach().float().requires_grad_(True) for t in (q, k, v))
    want = torch.autograd.grad(hipdiffusion.reference.attention(q2, k2, v2, heads, causal, 0.0), (q2, k2, v2),
                               upstream.float())
    for g, w in zip(got, want):
        assert_close_to(g, w, dtype)
    assert hipdiffusion.fallback_report() == []


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(2, 300, 77, 8, 40), (1, 200, 200, 2, 64), (1, 70, 90, 2, 160), (1, 50, 40, 2, 4)])
def test_attention_with_lse_matches_logsumexp(dtype, shape):
    """The log-sum-exp the forward keeps (4-wide heads: through the widened copies) against PyTorch's."""
    b, lq, lk, heads, d = shape
    q, k, v = rand(b, lq, heads * d, dtype=dtype), rand(b, lk, heads * d, dtype=dtype), rand(b, lk, heads * d, dtype=dtype)
    out, lse = torch.ops.hipdiffusion.attention_with_lse(q, k, v, heads, True, 0.0)
    split = lambda t: t.float().reshape(b, t.shape[1], heads, d).transpose(1, 2)  # noqa: E731
    scores = split(q) @ split(k).transpose(-1, -2) * d ** -0.5
    want = torch.logsumexp(scores.masked_fill(torch.ones_like(scores, dtype=torch.bool).triu(1), float("-inf")), -1)
    assert lse.dtype == torch.float32 and lse.shape == (b, heads, lq)
    torch.testing.assert_close(lse, want, atol=2e-3, rtol=1e-4)
    assert_close_to(out, hipdiffusion.reference.attention(q.float(), k.float(), v.float(), heads, True, 0.0), dtype)


def test_attention_with_lse_refuses_wide_heads_clearly():
    q = rand(1, 16, 512, dtype=torch.float16)
    with pytest.raises(NotImplementedError, match="log-sum-exp is written for heads up to 160"):
        torch.ops.hipdiffusion.attention_with_lse(q, q, q, 1, False, 0.0)


@pytest.mark.parametrize("dtype", DTYPES)
def test_attention_gradient_of_wide_heads_falls_back_to_pytorch_and_is_right(dtype):
    """The VAE's 512-wide head has no gradient kernel: PyTorch's gradient runs, counted."""
    q, k, v = (rand(1, 64, 512, dtype=dtype, grad=True) for _ in range(3))
    out = ops.attention(q, k, v, 1)
    upstream = torch.randn_like(out)
    got = torch.autograd.grad(out, (q, k, v), upstream)
    q2, k2, v2 = (t.detach().float().requires_grad_(True) for t in (q, k, v))
    want = torch.autograd.grad(hipdiffusion.reference.attention(q2, k2, v2, 1, False, 0.0), (q2, k2, v2), upstream.float())
    for g, w in zip(got, want):
        assert_close_to(g, w, dtype)
    assert [r["op"] for r in hipdiffusion.fallback_report()] == ["attention_backward"]


@pytest.mark.parametrize("dtype", DTYPES)
def test_norm_and_geglu_gradients_are_ours_and_right(dtype):
    """GroupNorm(+SiLU), LayerNorm and GEGLU have GPU gradient kernels: nothing falls back, and the
    gradients match PyTorch's autograd run in float32 on the same rounded inputs."""
    x = (rand(2, 64, 16, 16, dtype=dtype) * 2).to(memory_format=torch.channels_last).requires_grad_(True)
    w, b = rand(64, dtype=dtype, grad=True), rand(64, dtype=dtype, grad=True)
    t = rand(2, 300, 320, dtype=dtype, grad=True)
    lw, lb = rand(320, dtype=dtype, grad=True), rand(320, dtype=dtype, grad=True)
    h = rand(2, 300, 2 * 160, dtype=dtype, grad=True)
    cases = [
        (lambda x, w, b: ops.group_norm(x, 8, w, b, silu=True),
         lambda x, w, b: F.silu(F.group_norm(x, 8, w, b)), (x, w, b)),
        (lambda t, w, b: ops.layer_norm(t, w, b), lambda t, w, b: F.layer_norm(t, (320,), w, b), (t, lw, lb)),
        (lambda h: ops.geglu(h), lambda h: (lambda a, g: a * F.gelu(g))(*h.chunk(2, -1)), (h,)),
    ]
    for ours, theirs, inputs in cases:
        out = ours(*inputs)
        upstream = torch.randn_like(out)
        got = torch.autograd.grad(out, inputs, upstream)
        twins = [i.detach().float().requires_grad_(True) for i in inputs]
        want = torch.autograd.grad(theirs(*twins), twins, upstream.float())
        for g, w_ in zip(got, want):
            assert_close_to(g, w_, dtype)
    assert hipdiffusion.fallback_report() == []


def test_runs_on_pytorchs_current_stream():
    """Work queued on a side stream just before the op is seen by it: the op is ordered on that stream."""
    side = torch.cuda.Stream()
    x = rand(4, 4096, 320, dtype=torch.float16)
    w, b = rand(320, dtype=torch.float16), rand(320, dtype=torch.float16)
    torch.cuda.synchronize()
    with torch.cuda.stream(side):
        for _ in range(20):  # long enough that an unordered op would read x before this finishes
            x.mul_(1.0001)
        y = ops.layer_norm(x, w, b)
    side.synchronize()
    assert_close_to(y, F.layer_norm(x.float(), (320,), w.float(), b.float()), torch.float16)


def block(x, w_gn, b_gn, w_proj, heads):
    h = ops.group_norm(x, 32, w_gn, b_gn, silu=True)
    n, c, hh, ww = h.shape
    tokens = h.permute(0, 2, 3, 1).reshape(n, hh * ww, c)
    a = ops.attention(tokens, tokens, tokens, heads)
    return ops.geglu(ops.linear(a, w_proj))


def block_inputs(dtype=torch.float16):
    x = rand(2, 320, 32, 32, dtype=dtype).to(memory_format=torch.channels_last)
    return x, rand(320, dtype=dtype), rand(320, dtype=dtype), rand(640, 320, dtype=dtype) * 0.05, 8


def test_compile_fullgraph_inductor():
    args = block_inputs()
    eager = block(*args)
    compiled = torch.compile(block, fullgraph=True)(*args)
    torch.testing.assert_close(compiled, eager, atol=2e-3, rtol=2e-3)
    assert_kernels_ran()


def test_cuda_graph_capture_and_replay():
    args = block_inputs()
    x = args[0]
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        block(*args)  # the first call tunes its shapes: outside the capture
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = block(*args)
    x.copy_(torch.randn_like(x))  # new input values in the same memory
    graph.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(captured, block(*args), atol=0, rtol=0)
    assert_kernels_ran()


def test_a_new_shape_inside_a_capture_is_a_clear_error():
    """The autotuner cannot time candidates inside a capture: a shape it has not seen says so (PyTorch's
    rule: run captured work once before capturing it); after a run outside, the capture works."""
    x = rand(1, 24, 13, 13, dtype=torch.float16).to(memory_format=torch.channels_last)
    w = (rand(40, 24, 3, 3, dtype=torch.float16) * 0.05).to(memory_format=torch.channels_last)
    graph = torch.cuda.CUDAGraph()
    side = torch.cuda.Stream()
    with pytest.raises(NotImplementedError, match="run the captured work once before capturing"):
        with torch.cuda.graph(graph, stream=side):
            ops.conv2d(x, w, None, 1, 1)
    assert_close_to(ops.conv2d(x, w, None, 1, 1), F.conv2d(x.float(), w.float(), None, 1, 1), torch.float16)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=side):
        captured = ops.conv2d(x, w, None, 1, 1)
    graph.replay()
    torch.cuda.synchronize()
    assert_close_to(captured, F.conv2d(x.float(), w.float(), None, 1, 1), torch.float16)
