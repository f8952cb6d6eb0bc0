#!/usr/bin/env python3
"""Where a UNet step's GPU time goes, from Nsight Compute's per-kernel durations.

    ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv \\
        ./build/cuda/hd_bench_unet_step 1 64 cuda:0 f16 > ncu.csv
    python3 tools/device/profile_summary.py ncu.csv 2

The second argument is how many forwards the profile holds (hd_bench_unet_step 1 runs two plain ones:
its timed step and the graph loop's first, uncaptured, forward; a tuning cache from an earlier run keeps
the autotuner's timing launches out). Kernels are grouped by what they compute, from their names;
times are per forward. ncu runs the kernels one at a time, so launch gaps and overlap are not in it.
"""
import collections
import csv
import sys

# (group, substrings of the kernel name), first match wins: our kernels by their names, then the
# libraries' (cuDNN's convolution kernels say fprop/conv; cuBLASLt's say gemm or nvjet).
GROUPS = [
    ("attention (flash, ours)", ["flash_attention", "attention_kernel"]),
    ("weight transforms at load (upsamplers' phases)", ["upsample_conv_phases"]),
    ("GroupNorm (+SiLU)", ["group_statistics", "group_apply", "group_partial", "group_finalize", "group_norm"]),
    ("LayerNorm", ["layer_norm"]),
    ("GEGLU", ["geglu"]),
    ("GEMM / convolution (ours)", ["gemm_kernel", "split_k_reduce", "transpose_kernel"]),
    ("elementwise (add, mul, scale, activations)", ["binary_", "scale_kernel", "activation_kernel"]),
    ("layout (upsample, concat)", ["upsample", "concat"]),
    ("embeddings, softmax, conversions", ["embedding", "softmax", "convert"]),
    ("convolution (cuDNN)", ["fprop", "conv", "implicit", "cudnn", "xmma"]),
    ("GEMM (cuBLASLt)", ["nvjet", "gemm", "cutlass", "cublas"]),
]


def group_of(name: str) -> str:
    lower = name.lower()
    for group, keys in GROUPS:
        if any(k.lower() in lower for k in keys):
            return group
    return "other"


NANOSECONDS = {"ns": 1, "nsecond": 1, "us": 1e3, "usecond": 1e3, "ms": 1e6, "msecond": 1e6, "s": 1e9, "second": 1e9}


def kernel_durations(path):
    """Each profiled kernel in launch order: (name, grid size as ncu prints it, nanoseconds)."""
    with open(path, newline="", encoding="utf-8") as f:
        lines = [line for line in f if line.startswith('"')]  # ncu's own messages precede the table
    kernels = []
    for row in csv.DictReader(lines):  # one row per kernel and metric
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        ns = float(row["Metric Value"].replace(",", "")) * NANOSECONDS.get(row.get("Metric Unit", "ns"), 1)
        kernels.append((row["Kernel Name"], row.get("Grid Size", ""), ns))
    return kernels


def main():
    path, forwards = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 1
    per_group, count = collections.defaultdict(float), collections.Counter()
    per_kernel = collections.defaultdict(float)
    for name, _, ns in kernel_durations(path):
        per_group[group_of(name)] += ns
        count[group_of(name)] += 1
        per_kernel[name[:90]] += ns
    total = sum(per_group.values())
    print(f"GPU time per forward: {total / forwards / 1e6:.3f} ms in {sum(count.values()) // forwards} kernels")
    print(f"{'group':46s} {'ms':>8s} {'share':>6s} {'kernels':>8s}")
    for group, ns in sorted(per_group.items(), key=lambda kv: -kv[1]):
        print(f"{group:46s} {ns / forwards / 1e6:8.3f} {100 * ns / total:5.1f}% {count[group] // forwards:8d}")
    print("\nthe 15 kernels that take the longest in all (per forward):")
    for name, ns in sorted(per_kernel.items(), key=lambda kv: -kv[1])[:15]:
        print(f"  {ns / forwards / 1e6:8.3f} ms  {name}")


if __name__ == "__main__":
    main()
