#!/usr/bin/env python3
"""Attention's gradient on one shape, ours (hipdiffusion's kernel) and SDPA's cuDNN backend, each `--runs`
times after one warm-up: the process Nsight Compute profiles for tools/device/gradient_metrics.sh.

    PYTHONPATH=python python3 tools/device/gradient_pair.py [--tokens 4096 --heads 10 --head-dim 64]
"""
import argparse

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from hipdiffusion import ops


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=4096)
    parser.add_argument("--heads", type=int, default=10)
    parser.add_argument("--head-dim", type=int, default=64)
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    torch.manual_seed(0)
    shape = (2, args.tokens, args.heads * args.head_dim)
    q, k, v = (torch.randn(shape, device="cuda", dtype=torch.float16, requires_grad=True) for _ in range(3))
    grad = torch.randn(shape, device="cuda", dtype=torch.float16)
    out = ops.attention(q, k, v, args.heads)
    split = [t.detach().view(2, args.tokens, args.heads, args.head_dim).transpose(1, 2).contiguous()
             .requires_grad_(True) for t in (q, k, v)]
    grad_split = grad.view(2, args.tokens, args.heads, args.head_dim).transpose(1, 2).contiguous()
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        theirs = F.scaled_dot_product_attention(*split)
    for _ in range(1 + args.runs):  # the first of each: a warm-up
        torch.autograd.grad(out, (q, k, v), grad, retain_graph=True)
        torch.autograd.grad(theirs, split, grad_split, retain_graph=True)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
