#!/usr/bin/env python3
"""PyTorch's own kernels on the shapes of hd_bench_gpu_kernels, in the same session on the same GPU:
torch's scaled_dot_product_attention with each backend it offers (flash, cuDNN, memory-efficient),
group_norm + silu as diffusers runs them (NCHW), cuDNN's convolution and cuBLAS's linear on the UNet's and
VAE's shapes, layer_norm, and the ceilings: device-to-device copy
bandwidth and the dense bf16/f16 matrix product rate. Timed with CUDA events, median of 7 batches.

    python3 bench/torch_peers.py
"""
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


def median_ms(fn) -> float:
    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record(); fn(); end.record(); torch.cuda.synchronize()
    reps = max(3, min(2000, int(20.0 / max(start.elapsed_time(end), 1e-3))))
    times = []
    for _ in range(7):
        start.record()
        for _ in range(reps):
            fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / reps)
    return sorted(times)[3]


def replay_ms(fn, calls=50) -> float:
    """GPU time per call without the launch cost: `calls` calls captured into one CUDA graph, replayed."""
    fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    return median_ms(graph.replay) / calls


def main():
    dev = torch.device("cuda")
    print("device:", torch.cuda.get_device_name(), "torch", torch.__version__)
    n = 1 << 29
    a, b = torch.empty(n, dtype=torch.float16, device=dev), torch.empty(n, dtype=torch.float16, device=dev)
    copy_ms = median_ms(lambda: b.copy_(a))
    copy_gbs = 2 * n * 2 / (copy_ms * 1e6)
    print(f"copy 1 GiB: {copy_ms:.3f} ms, {copy_gbs:.0f} GB/s (read + write)")
    for dtype in (torch.float16, torch.bfloat16):
        x = torch.randn(8192, 8192, dtype=dtype, device=dev)
        ms = median_ms(lambda: x @ x)
        print(f"matmul 8192^3 {str(dtype)[6:]}: {ms:.3f} ms, {2 * 8192 ** 3 / (ms * 1e9):.0f} TFLOP/s")
    del a, b, x

    print("\nattention (f16)                        backend     ms    TFLOP/s")
    cases = [("SD1.5 64x64 self  B2 H8 L4096 D40", 2, 8, 4096, 4096, 40),
             ("SD1.5 64x64 cross B2 H8 L4096/77 D40", 2, 8, 4096, 77, 40),
             ("SD1.5 32x32 self  B2 H8 L1024 D80", 2, 8, 1024, 1024, 80),
             ("SD1.5 16x16 self  B2 H8 L256 D160", 2, 8, 256, 256, 160),
             ("SDXL 64x64 self   B2 H10 L4096 D64", 2, 10, 4096, 4096, 64),
             ("SDXL 32x32 self   B2 H20 L1024 D64", 2, 20, 1024, 1024, 64)]
    for name, bsz, heads, lq, lk, d in cases:
        q = torch.randn(bsz, heads, lq, d, dtype=torch.float16, device=dev)
        k = torch.randn(bsz, heads, lk, d, dtype=torch.float16, device=dev)
        v = torch.randn(bsz, heads, lk, d, dtype=torch.float16, device=dev)
        flop = 4 * bsz * heads * lq * lk * d
        for backend in (SDPBackend.FLASH_ATTENTION, SDPBackend.CUDNN_ATTENTION, SDPBackend.EFFICIENT_ATTENTION):
            try:
                with sdpa_kernel(backend):
                    ms = median_ms(lambda: F.scaled_dot_product_attention(q, k, v))
                print(f"{name:38s} {backend.name[:9]:9s} {ms:8.3f} {flop / (ms * 1e9):8.1f}")
            except RuntimeError as e:
                print(f"{name:38s} {backend.name[:9]:9s}   refused ({str(e).splitlines()[0][:60]})")

    print("\ngroup_norm + silu (f16, NCHW as diffusers)  launched ms  graph ms  GB/s  of copy")
    for shape in [(2, 64, 64, 320), (2, 32, 32, 640), (2, 16, 16, 1280), (1, 128, 128, 512), (1, 512, 512, 256)]:
        nb, h, w, c = shape
        x = torch.randn(nb, c, h, w, dtype=torch.float16, device=dev) + 0.5
        gamma = torch.randn(c, dtype=torch.float16, device=dev) + 1
        beta = torch.randn(c, dtype=torch.float16, device=dev)
        def norm():
            return F.silu(F.group_norm(x, 32, gamma, beta, 1e-5))
        ms, replayed = median_ms(norm), replay_ms(norm)
        gbs = 2 * x.numel() * 2 / (replayed * 1e6)
        print(f"{str(list(shape)):34s} {ms:9.4f} {replayed:9.4f} {gbs:6.0f} {100 * gbs / copy_gbs:5.0f}%")

    torch.backends.cudnn.benchmark = True  # cuDNN picks its fastest algorithm per shape, as we autotune
    print("\nconv2d (f16, channels_last, bias; cuDNN)       ms     TFLOP/s")
    convs = [("UNet 64x64 320->320 3x3 B2", (2, 64, 64, 320), 320, 3, 1),
             ("UNet 32x32 640->640 3x3 B2", (2, 32, 32, 640), 640, 3, 1),
             ("UNet 16x16 1280->1280 3x3 B2", (2, 16, 16, 1280), 1280, 3, 1),
             ("UNet 8x8 1280->1280 3x3 B2", (2, 8, 8, 1280), 1280, 3, 1),
             ("UNet up 64x64 640->320 3x3 B2", (2, 64, 64, 640), 320, 3, 1),
             ("UNet down 64x64 320 3x3 s2 B2", (2, 64, 64, 320), 320, 3, 2),
             ("VAE 128x128 512->512 3x3", (1, 128, 128, 512), 512, 3, 1),
             ("VAE 512x512 256->256 3x3", (1, 512, 512, 256), 256, 3, 1)]
    for name, (nb, h, w, cin), cout, k, stride in convs:
        x = torch.randn(nb, cin, h, w, dtype=torch.float16, device=dev).to(memory_format=torch.channels_last)
        weight = torch.randn(cout, cin, k, k, dtype=torch.float16, device=dev).to(memory_format=torch.channels_last)
        bias = torch.randn(cout, dtype=torch.float16, device=dev)
        ms = median_ms(lambda: F.conv2d(x, weight, bias, stride=stride, padding=k // 2))
        ho, wo = (h + 2 * (k // 2) - k) // stride + 1, (w + 2 * (k // 2) - k) // stride + 1
        flop = 2 * nb * ho * wo * cout * k * k * cin
        print(f"{name:40s} {ms:8.3f} {flop / (ms * 1e9):8.1f}")

    print("\nlinear (f16, bias; cuBLAS)                     ms     TFLOP/s")
    for name, m, n, k in [("to_q 64x64 B2: 8192 x 320 <- 320", 8192, 320, 320),
                          ("GEGLU proj: 8192 x 2560 <- 320", 8192, 2560, 320),
                          ("ff out: 8192 x 320 <- 1280", 8192, 320, 1280),
                          ("GEGLU proj 16x16: 512 x 10240 <- 1280", 512, 10240, 1280),
                          ("to_k cross: 154 x 320 <- 768", 154, 320, 768)]:
        x = torch.randn(m, k, dtype=torch.float16, device=dev)
        weight = torch.randn(n, k, dtype=torch.float16, device=dev)
        bias = torch.randn(n, dtype=torch.float16, device=dev)
        ms = median_ms(lambda: F.linear(x, weight, bias))
        print(f"{name:40s} {ms:8.3f} {2 * m * n * k / (ms * 1e9):8.1f}")

    print("\nattention D512 (VAE mid, f16)  backend      ms    TFLOP/s")
    for length in (4096, 16384):
        q = torch.randn(1, 1, length, 512, dtype=torch.float16, device=dev)
        for backend in (SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH):
            try:
                with sdpa_kernel(backend):
                    ms = median_ms(lambda: F.scaled_dot_product_attention(q, q, q))
                print(f"VAE mid B1 H1 L{length:<6d} D512 {backend.name[:9]:9s} {ms:8.3f} {4 * length * length * 512 / (ms * 1e9):8.1f}")
            except RuntimeError as e:
                print(f"VAE mid B1 H1 L{length:<6d} D512 {backend.name[:9]:9s} refused ({str(e).splitlines()[0][:50]})")

    print("\nlayer_norm (f16)                     ms     GB/s  of copy")
    for shape in [(2, 4096, 320), (2, 1024, 640), (2, 77, 768)]:
        x = torch.randn(*shape, dtype=torch.float16, device=dev)
        gamma = torch.randn(shape[-1], dtype=torch.float16, device=dev)
        beta = torch.randn(shape[-1], dtype=torch.float16, device=dev)
        ms = median_ms(lambda: F.layer_norm(x, (shape[-1],), gamma, beta, 1e-5))
        gbs = 2 * x.numel() * 2 / (ms * 1e6)
        print(f"{str(list(shape)):34s} {ms:8.3f} {gbs:8.0f} {100 * gbs / copy_gbs:5.0f}%")


if __name__ == "__main__":
    main()
