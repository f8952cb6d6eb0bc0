#!/usr/bin/env python3
"""Attention's gradient, hipdiffusion's kernel (src/ops/gpu/attention_backward.cu) beside PyTorch's
scaled_dot_product_attention backward with each of its GPU backends (flash, memory-efficient, cuDNN), on
SD1.5's and SDXL's attention shapes, f16 (or bf16), in one run on one GPU.

Each side in its own layout ([B, L, heads·D] for ours, [B, heads, L, D] for SDPA), two times each:
- "ms": forward + backward through autograd minus the forward alone (CUDA events, median of repeated
  batches). On the small shapes this is the host's time to issue the work (Python autograd and dispatch
  on both sides), not the GPU's.
- "GPU ms": the GPU's busy time in the backward alone (the sum of its kernels and memsets, torch.profiler,
  the graph kept and the backward repeated), what the kernels themselves take.
Both forwards keep each row's log-sum-exp for their backward (ours: hipdiffusion::attention_with_lse).
--kernels also lists, for ours and the best backend, each kernel's GPU time in one backward.

    PYTHONPATH=python python3 bench/attention_backward_bench.py [--dtype bf16] [--kernels] [--json-out FILE]
"""
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_ops_bench import parse_arguments, report, time_ms  # noqa: E402

from hipdiffusion import ops  # noqa: E402

# (tokens, keys, heads, head width): SD1.5's levels (8 heads of 40/80/160), self and cross attention;
# SDXL's (heads of 64) at 1024x1024.
SHAPES = [(4096, 4096, 8, 40), (4096, 77, 8, 40), (1024, 1024, 8, 80), (256, 256, 8, 160),
          (4096, 4096, 10, 64), (4096, 77, 10, 64), (1024, 1024, 20, 64)]
BACKENDS = {"flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION,
            "cudnn": SDPBackend.CUDNN_ATTENTION}


def backward_ms(forward, inputs, grad):
    def both():
        torch.autograd.grad(forward(*inputs), inputs, grad)
    return time_ms(both) - time_ms(lambda: forward(*inputs))


def backward_gpu_ms(forward, inputs, grad, repeats=10):
    """The GPU's busy time per backward: every kernel and memset the profiler saw, over `repeats`; and
    {kernel: (calls, us)} per backward."""
    out = forward(*inputs)
    for _ in range(3):
        torch.autograd.grad(out, inputs, grad, retain_graph=True)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as p:
        for _ in range(repeats):
            torch.autograd.grad(out, inputs, grad, retain_graph=True)
        torch.cuda.synchronize()
    # "Activity Buffer Request": the profiler's own GPU work, not the backward's.
    events = [e for e in p.key_averages() if e.key != "Activity Buffer Request" and e.self_device_time_total > 0]
    kernels = {e.key: (e.count / repeats, e.self_device_time_total / repeats) for e in events}
    return sum(us for _, us in kernels.values()) / 1e3, kernels


def both_times(forward, inputs, grad):
    return (backward_ms(forward, inputs, grad), *backward_gpu_ms(forward, inputs, grad))


def kernel_lines(side, kernels):
    """One line a kernel, longest first: calls and microseconds in one backward, the name cut short."""
    ranked = sorted(kernels.items(), key=lambda item: -item[1][1])
    return [f"    {side}: {us:7.1f} us  x{calls:g}  {name[:90]}" for name, (calls, us) in ranked]


def main():
    args, dtype = parse_arguments(
        __doc__, lambda parser: parser.add_argument("--kernels", action="store_true",
                                                    help="each kernel's GPU time, ours and the best backend's"))
    rows, breakdown = [], []
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, {args.dtype}, batch 2")
    print("| shape | ours ms (GPU ms) | " + " | ".join(f"SDPA {b} ms (GPU ms)" for b in BACKENDS)
          + " | ours / best | GPU: ours / best |")
    print("| --- | --- | " + " | ".join("---" for _ in BACKENDS) + " | --- | --- |")
    for lq, lk, heads, d in SHAPES:
        c = heads * d
        q, k, v = (torch.randn(2, n, c, device="cuda", dtype=dtype, requires_grad=True) for n in (lq, lk, lk))
        grad = torch.randn(2, lq, c, device="cuda", dtype=dtype)
        ours, ours_gpu, ours_kernels = both_times(lambda q, k, v: ops.attention(q, k, v, heads), (q, k, v), grad)
        split = [t.detach().view(2, t.shape[1], heads, d).transpose(1, 2).contiguous().requires_grad_(True)
                 for t in (q, k, v)]
        grad_split = grad.view(2, lq, heads, d).transpose(1, 2).contiguous()
        theirs, theirs_gpu, theirs_kernels = {}, {}, {}
        for name, backend in BACKENDS.items():
            try:
                with sdpa_kernel(backend):
                    theirs[name], theirs_gpu[name], theirs_kernels[name] = both_times(
                        F.scaled_dot_product_attention, split, grad_split)
            except RuntimeError:  # the backend does not take this shape or dtype here
                theirs[name] = theirs_gpu[name] = None
        best = min(t for t in theirs.values() if t is not None)
        best_name = min((n for n, t in theirs_gpu.items() if t is not None), key=lambda n: theirs_gpu[n])
        best_gpu = theirs_gpu[best_name]
        rows.append({"shape": [lq, lk, heads, d], "ours_ms": ours, "sdpa_ms": theirs, "ratio_to_best": ours / best,
                     "ours_gpu_ms": ours_gpu, "sdpa_gpu_ms": theirs_gpu, "gpu_ratio_to_best": ours_gpu / best_gpu})
        cells = " | ".join("-" if t is None else f"{t:.3f} ({theirs_gpu[n]:.3f})" for n, t in theirs.items())
        print(f"| {lq}x{lk} {heads}x{d} | {ours:.3f} ({ours_gpu:.3f}) | {cells} | {ours / best:.2f}x "
              f"| {ours_gpu / best_gpu:.2f}x |", flush=True)
        breakdown += [f"\n{lq}x{lk} {heads}x{d}:"] + kernel_lines("ours", ours_kernels) \
            + kernel_lines(best_name, theirs_kernels[best_name])
    if args.kernels:  # after the table, so that it stays one table
        print("\n".join(breakdown))
    report(rows, args.dtype, args.json_out)

if __name__ == "__main__":
    main()
