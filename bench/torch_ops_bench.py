"""hipdiffusion's PyTorch ops beside PyTorch's own, on SD1.5's shapes (batch 2 under CFG, f16), in one
run on one GPU: each op timed with CUDA events (median of repeated batches, after a warm-up that also
fills the autotuner's choices). Prints a markdown table; --json-out keeps the numbers.

    PYTHONPATH=python python3 bench/torch_ops_bench.py [--dtype bf16] [--json-out FILE]
"""

import argparse
import json
import statistics

import torch
import torch.nn.functional as F

import hipdiffusion
from hipdiffusion import ops


def time_ms(fn, repeats=7, batch=20):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(batch):
            fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / batch)
    return statistics.median(times)


def cases(dtype):
    def rand(*shape, scale=1.0):
        return torch.randn(*shape, device="cuda", dtype=dtype) * scale

    def cl(t):
        return t.to(memory_format=torch.channels_last)

    def sdpa(q, k, v, heads):
        b, lq, c = q.shape
        d = c // heads
        split = lambda t: t.view(b, t.shape[1], heads, d).transpose(1, 2)  # noqa: E731
        return F.scaled_dot_product_attention(split(q), split(k), split(v)).transpose(1, 2).reshape(b, lq, c)

    # A tiny tensor: the time is the host's, per call (Python wrapper, dispatcher, launch).
    x, w, b = rand(1, 8, 64), rand(64), rand(64)
    yield "layer_norm 8x64 (host time per call)", lambda: ops.layer_norm(x, w, b), lambda: F.layer_norm(x, (64,), w, b)
    for lq, lk, c, heads in [(4096, 4096, 320, 8), (4096, 77, 320, 8), (1024, 1024, 640, 8), (256, 256, 1280, 8)]:
        q, k, v = rand(2, lq, c), rand(2, lk, c), rand(2, lk, c)
        yield f"attention {lq}x{lk} {heads}x{c // heads}", lambda: ops.attention(q, k, v, heads), lambda: sdpa(q, k, v, heads)
    q, k, v = rand(1, 4096, 512), rand(1, 4096, 512), rand(1, 4096, 512)
    yield "attention VAE 4096x4096 1x512", lambda: ops.attention(q, k, v, 1), lambda: sdpa(q, k, v, 1)
    for c, size in [(320, 64), (640, 32), (1280, 16)]:
        x, w, b = cl(rand(2, c, size, size)), rand(c), rand(c)
        yield (f"group_norm+silu {c}x{size}x{size}", lambda: ops.group_norm(x, 32, w, b, silu=True),
               lambda: F.silu(F.group_norm(x, 32, w, b)))
    x, w, b = rand(2, 4096, 320), rand(320), rand(320)
    yield "layer_norm 4096x320", lambda: ops.layer_norm(x, w, b), lambda: F.layer_norm(x, (320,), w, b)
    h = rand(2, 4096, 2560)
    yield "geglu 4096x2560", lambda: ops.geglu(h), lambda: (lambda a, g: a * F.gelu(g))(*h.chunk(2, -1))
    x, w, b, r = rand(2, 4096, 320), rand(2560, 320, scale=0.05), rand(2560), None
    yield "linear 4096x320->2560", lambda: ops.linear(x, w, b), lambda: F.linear(x, w, b)
    for cin, cout, size in [(320, 320, 64), (640, 640, 32), (1280, 1280, 16), (4, 320, 64)]:
        x, w, b = cl(rand(2, cin, size, size)), cl(rand(cout, cin, 3, 3, scale=0.05)), rand(cout)
        yield (f"conv3x3 {cin}->{cout} {size}x{size}", lambda: ops.conv2d(x, w, b, 1, 1),
               lambda: F.conv2d(x, w, b, 1, 1))


def parse_arguments(doc, add_arguments=None):
    """--dtype f16|bf16 and --json-out FILE, the arguments of the op benchmarks (and a benchmark's own, by
    add_arguments(parser)); the torch dtype too."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--dtype", choices=["f16", "bf16"], default="f16")
    parser.add_argument("--json-out")
    if add_arguments is not None:
        add_arguments(parser)
    args = parser.parse_args()
    return args, torch.float16 if args.dtype == "f16" else torch.bfloat16


def main():
    args, dtype = parse_arguments(__doc__)
    torch.backends.cudnn.benchmark = True
    rows = []
    torch.set_grad_enabled(False)  # as pipelines run (torch.no_grad), not inference_mode
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, {args.dtype}, under torch.no_grad()")
    print("| op | hipdiffusion ms | PyTorch ms | ratio |\n| --- | --- | --- | --- |")
    for name, ours, theirs in cases(dtype):
        t_ours, t_theirs = time_ms(ours), time_ms(theirs)
        rows.append({"op": name, "hipdiffusion_ms": t_ours, "pytorch_ms": t_theirs})
        print(f"| {name} | {t_ours:.4f} | {t_theirs:.4f} | {t_ours / t_theirs:.2f}x |", flush=True)
    report(rows, args.dtype, args.json_out)


def report(rows, dtype_name, json_out):
    """Prints what fell back and keeps the rows, the device and the fallbacks in `json_out` when given."""
    fallbacks = hipdiffusion.fallback_report()
    print("fallbacks:", fallbacks or "none")
    if json_out:
        with open(json_out, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "dtype": dtype_name,
                       "rows": rows, "fallbacks": fallbacks}, f, indent=1)


if __name__ == "__main__":
    main()
