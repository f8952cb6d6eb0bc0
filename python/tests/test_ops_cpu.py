"""The ops against PyTorch's own on the CPU (float32, random inputs), their gradients against PyTorch's
autograd and finite differences, and their registrations (schema, fake functions, autograd) through
torch.library.opcheck. That the engine's kernels ran, not a fallback, is checked for each."""

import pytest
import torch
import torch.nn.functional as F

import hipdiffusion
from hipdiffusion import ops

hd = torch.ops.hipdiffusion


def assert_no_fallback():
    assert hipdiffusion.fallback_report() == []


def rand(*shape, grad=False):
    return torch.randn(*shape, dtype=torch.float32, requires_grad=grad)


def channels_last(x):
    return x.to(memory_format=torch.channels_last)


def check_gradients(ours, theirs, inputs, atol=2e-5, rtol=1e-4):
    """Gradients of ours(*inputs) and theirs(*inputs) for one random upstream gradient."""
    leaves = [t.detach().clone().requires_grad_(True) for t in inputs]
    twins = [t.detach().clone().requires_grad_(True) for t in inputs]
    out = ours(*leaves)
    ref = theirs(*twins)
    torch.testing.assert_close(out, ref, atol=atol, rtol=rtol)
    upstream = torch.randn_like(ref)
    got = torch.autograd.grad(out, leaves, upstream)
    want = torch.autograd.grad(ref, twins, upstream)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, atol=atol * 10, rtol=rtol * 10)


@pytest.mark.parametrize("shape", [(2, 5, 7, 2, 8), (1, 64, 77, 8, 40), (2, 33, 33, 1, 4), (1, 9, 9, 3, 1)])
@pytest.mark.parametrize("causal", [False, True])
def test_attention_matches_sdpa(shape, causal):
    b, lq, lk, heads, d = shape
    q, k, v = rand(b, lq, heads * d), rand(b, lk, heads * d), rand(b, lk, heads * d)

    def theirs(q, k, v):
        split = lambda t: t.reshape(b, t.shape[1], heads, d).transpose(1, 2)  # noqa: E731
        o = F.scaled_dot_product_attention(split(q), split(k), split(v), is_causal=causal)
        return o.transpose(1, 2).reshape(b, lq, heads * d)

    check_gradients(lambda q, k, v: ops.attention(q, k, v, heads, causal=causal), theirs, (q, k, v))
    assert_no_fallback()


def log_sum_exp(q, k, heads, causal, scale=None):
    """Each row's log-sum-exp of its scaled scores, [B, heads, Lq], by PyTorch."""
    b, lq, c = q.shape
    d = c // heads
    split = lambda t: t.reshape(b, t.shape[1], heads, d).transpose(1, 2)  # noqa: E731
    scores = split(q) @ split(k).transpose(-1, -2) * (scale if scale else d ** -0.5)
    if causal:
        scores = scores.masked_fill(torch.ones_like(scores, dtype=torch.bool).triu(1), float("-inf"))
    return torch.logsumexp(scores, dim=-1)


@pytest.mark.parametrize("causal", [False, True])
def test_attention_with_lse_matches_logsumexp(causal):
    q, k, v = rand(2, 9, 24), rand(2, 11, 24), rand(2, 11, 24)
    out, lse = hd.attention_with_lse(q, k, v, 3, causal, 0.4)
    torch.testing.assert_close(out, ops.attention(q, k, v, 3, causal=causal, scale=0.4))
    torch.testing.assert_close(lse, log_sum_exp(q, k, 3, causal, 0.4), atol=1e-5, rtol=1e-5)


def test_gradients_run_the_registered_formula_as_one_autograd_function():
    """With a gradient to come, the ops run their registered formula as one autograd.Function (the
    torch.library layers cost host time per call); without one, no graph is kept."""
    x = rand(2, 5, 16, grad=True)
    out = ops.layer_norm(x, None, None)
    assert type(out.grad_fn).__name__ == "_EagerAutogradBackward"
    assert out.grad_fn.formula_backward.__name__ == "_layer_norm_backward"
    with torch.no_grad():
        assert ops.layer_norm(x, None, None).grad_fn is None
    assert ops.layer_norm(x.detach(), None, None).grad_fn is None


def test_attention_scale():
    q, k, v = rand(1, 6, 16), rand(1, 10, 16), rand(1, 10, 16)
    got = ops.attention(q, k, v, 2, scale=0.3)
    want = hipdiffusion.reference.attention(q, k, v, 2, False, 0.3)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    assert not torch.allclose(got, ops.attention(q, k, v, 2))


@pytest.mark.parametrize("silu", [False, True])
@pytest.mark.parametrize("shape,groups", [((2, 32, 6, 5), 8), ((1, 12, 3, 3), 3), ((2, 6, 10), 2)])
def test_group_norm_matches_pytorch(shape, groups, silu):
    x = rand(*shape) * 3 + 1
    if x.dim() == 4:
        x = channels_last(x)
    else:
        x = x.transpose(1, 2).contiguous().transpose(1, 2)  # [N, C, L] with channels last in memory
    w, b = rand(shape[1]), rand(shape[1])

    def theirs(x, w, b):
        y = F.group_norm(x, groups, w, b, 1e-5)
        return F.silu(y) if silu else y

    check_gradients(lambda x, w, b: ops.group_norm(x, groups, w, b, 1e-5, silu=silu), theirs, (x, w, b))
    assert_no_fallback()


@pytest.mark.parametrize("shape", [(3, 7, 40), (2, 320), (5, 1, 1, 64)])
def test_layer_norm_matches_pytorch(shape):
    x, w, b = rand(*shape) * 2 - 1, rand(shape[-1]), rand(shape[-1])
    check_gradients(lambda x, w, b: ops.layer_norm(x, w, b, 1e-6),
                    lambda x, w, b: F.layer_norm(x, (shape[-1],), w, b, 1e-6), (x, w, b))
    assert_no_fallback()


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_geglu_matches_pytorch(approximate):
    x = rand(2, 9, 2 * 24) * 2

    def theirs(x):
        value, gate = x.chunk(2, -1)
        return value * F.gelu(gate, approximate=approximate)

    check_gradients(lambda x: ops.geglu(x, approximate), theirs, (x,))
    assert_no_fallback()


@pytest.mark.parametrize("with_bias,with_residual", [(False, False), (True, False), (True, True)])
def test_linear_matches_pytorch(with_bias, with_residual):
    x, w = rand(2, 5, 24), rand(16, 24)
    b = rand(16) if with_bias else None
    r = rand(2, 5, 16) if with_residual else None
    inputs = [t for t in (x, w, b, r) if t is not None]

    def unpack(args):
        it = iter(args)
        return next(it), next(it), next(it) if with_bias else None, next(it) if with_residual else None

    check_gradients(lambda *a: ops.linear(*unpack(a)),
                    lambda *a: (lambda x, w, b, r: F.linear(x, w, b) + (r if r is not None else 0))(*unpack(a)),
                    inputs, atol=1e-4)
    assert_no_fallback()


@pytest.mark.parametrize("kernel,stride,padding", [(3, 1, 1), (3, 2, 1), (1, 1, 0)])
def test_conv2d_matches_pytorch(kernel, stride, padding):
    x = channels_last(rand(2, 8, 9, 7))
    w = channels_last(rand(12, 8, kernel, kernel))
    b = rand(12)
    check_gradients(lambda x, w, b: ops.conv2d(x, w, b, stride, padding),
                    lambda x, w, b: F.conv2d(x, w, b, stride, padding), (x, w, b), atol=1e-4)
    assert_no_fallback()


def test_conv2d_residual():
    x, w = channels_last(rand(1, 4, 6, 6)), channels_last(rand(4, 4, 3, 3))
    r = channels_last(rand(1, 4, 6, 6))
    torch.testing.assert_close(ops.conv2d(x, w, None, 1, 1, residual=r), F.conv2d(x, w, None, 1, 1) + r,
                               atol=1e-4, rtol=1e-4)
    assert_no_fallback()


# ---- gradcheck: finite differences against the engine's gradient kernels ----
# In float32, as the engine's CPU reference computes (float64 inputs fall back to PyTorch, by design), so
# eps and the tolerances are those of float32 central differences; a wrong formula is off by O(1).

GRADCHECK = dict(eps=1e-3, atol=3e-3, rtol=3e-2)


@pytest.mark.filterwarnings("ignore:Input #")
def test_gradcheck_attention():
    q, k, v = rand(1, 4, 8, grad=True), rand(1, 5, 8, grad=True), rand(1, 5, 8, grad=True)
    assert torch.autograd.gradcheck(lambda q, k, v: hd.attention(q, k, v, 2, True, 0.0), (q, k, v), **GRADCHECK)


@pytest.mark.filterwarnings("ignore:Input #")
def test_gradcheck_attention_with_lse():
    q, k, v = rand(1, 4, 8, grad=True), rand(1, 5, 8, grad=True), rand(1, 5, 8, grad=True)
    assert torch.autograd.gradcheck(lambda q, k, v: hd.attention_with_lse(q, k, v, 2, False, 0.0)[0], (q, k, v),
                                    **GRADCHECK)


@pytest.mark.filterwarnings("ignore:Input #")
@pytest.mark.parametrize("silu", [False, True])
def test_gradcheck_group_norm(silu):
    x, w, b = rand(2, 3, 2, 4, grad=True), rand(4, grad=True), rand(4, grad=True)
    assert torch.autograd.gradcheck(lambda x, w, b: hd.group_norm(x, w, b, 2, 1e-5, silu), (x, w, b), **GRADCHECK)


@pytest.mark.filterwarnings("ignore:Input #")
def test_gradcheck_layer_norm():
    x, w, b = rand(3, 6, grad=True), rand(6, grad=True), rand(6, grad=True)
    assert torch.autograd.gradcheck(lambda x, w, b: hd.layer_norm(x, w, b, 1e-5), (x, w, b), **GRADCHECK)


@pytest.mark.filterwarnings("ignore:Input #")
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gradcheck_geglu(approximate):
    x = rand(3, 8, grad=True)
    assert torch.autograd.gradcheck(lambda x: hd.geglu(x, approximate), (x,), **GRADCHECK)


# ---- opcheck: schema, fake functions, autograd registration, AOT dispatch ----


def opcheck_cases():
    yield "attention", (rand(2, 6, 16, grad=True), rand(2, 9, 16, grad=True), rand(2, 9, 16, grad=True), 4, False, 0.0)
    yield "attention", (rand(1, 7, 12, grad=True), rand(1, 7, 12, grad=True), rand(1, 7, 12, grad=True), 3, True, 0.5)
    yield "attention_with_lse", (rand(2, 6, 16, grad=True), rand(2, 9, 16, grad=True), rand(2, 9, 16, grad=True), 4,
                                 True, 0.0)
    yield "group_norm", (rand(2, 3, 4, 8, grad=True), rand(8, grad=True), rand(8, grad=True), 4, 1e-5, True)
    yield "layer_norm", (rand(2, 5, 16, grad=True), rand(16, grad=True), rand(16, grad=True), 1e-5)
    yield "geglu", (rand(2, 3, 20, grad=True), "tanh")
    yield "linear", (rand(2, 3, 8, grad=True), rand(5, 8, grad=True), rand(5, grad=True), rand(2, 3, 5, grad=True))
    yield "linear", (rand(4, 8, grad=True), rand(5, 8, grad=True), None, None)
    yield "conv2d", (rand(1, 5, 6, 3, grad=True), rand(4, 3, 3, 3, grad=True), rand(4, grad=True), None, 2, 1)
    yield "attention_backward", (rand(1, 3, 8), rand(1, 3, 8), rand(1, 4, 8), rand(1, 4, 8), rand(1, 3, 8), 2, False, 0.0)
    yield "attention_backward", (rand(1, 3, 8), rand(1, 3, 8), rand(1, 4, 8), rand(1, 4, 8), rand(1, 3, 8), 2, False, 0.0,
                                 rand(1, 2, 3))
    yield "group_norm_backward", (rand(1, 2, 2, 4), rand(1, 2, 2, 4), rand(4), rand(4), 2, 1e-5, False)
    yield "layer_norm_backward", (rand(2, 6), rand(2, 6), rand(6), 1e-5)
    yield "geglu_backward", (rand(2, 4), rand(2, 8), "none")


@pytest.mark.parametrize("name,args", list(opcheck_cases()), ids=lambda v: v if isinstance(v, str) else "")
def test_opcheck(name, args):
    torch.library.opcheck(getattr(hd, name).default, args)


# ---- torch.compile traces the ops whole ----


def test_compile_fullgraph_block():
    heads = 2
    x = channels_last(rand(1, 8, 4, 4))
    w_gn, b_gn = rand(8), rand(8)
    w_proj = rand(32, 8)

    def block(x):
        h = ops.group_norm(x, 4, w_gn, b_gn, silu=True)
        tokens = h.permute(0, 2, 3, 1).reshape(1, 16, 8)
        tokens = ops.layer_norm(tokens, None, None)
        a = ops.attention(tokens, tokens, tokens, heads)
        return ops.geglu(ops.linear(a, w_proj, residual=None))

    eager = block(x)
    compiled = torch.compile(block, fullgraph=True, backend="aot_eager")(x)
    torch.testing.assert_close(compiled, eager)
    assert_no_fallback()
