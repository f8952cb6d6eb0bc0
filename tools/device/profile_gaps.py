#!/usr/bin/env python3
"""Where our own GEMM and convolution kernels lose to the vendor libraries inside one UNet forward (issue 21),
from two Nsight Compute profiles of the same forward: one under `HD_KERNELS=own`, one under `HD_KERNELS=all`
(tools/device/gpu_profile.sh's command, with launch__grid_size added to the metrics if wanted).

    profile_gaps.py OWN.csv ALL.csv [ROWS [SEGMENTS]]

Both forwards launch the same non-GEMM kernels (norms, attention, GEGLU, elementwise) in the same order; the
products and convolutions between two of them (our tiles and split-K reductions, or cuDNN's and cuBLASLt's
kernels) are one segment, the same ops in both profiles. Segments are paired in order and listed by how much
longer ours took (µs per forward, the first of the profile's forwards), then totalled by the kernel they
follow. SEGMENTS (comma-separated indices) prints those segments kernel by kernel.
"""
import collections
import re
import sys

from profile_summary import kernel_durations

# Our kernels that are not products: they bound the segments.
NOT_PRODUCTS = ("flash", "group_", "layer_norm", "geglu", "binary_", "scale_kernel", "activation_kernel", "upsample",
                "concat", "embedding", "softmax", "convert", "timestep", "attention", "transpose")


def kernels(path):
    listed = [{"name": name, "grid": grid, "us": ns / 1e3} for name, grid, ns in kernel_durations(path)]
    return listed[: len(listed) // 2]  # the profile's first forward of two


def is_product(name):
    return "split_k_reduce" in name or "gemm_kernel" in name or not any(k in name for k in NOT_PRODUCTS)


def short(name):
    name = re.sub(r"\(.*", "", name)
    tile = re.search(r"WgmmaTile<(\d+), (\d+)(?:, (\d+))?", name)
    if tile:
        return f"wgmma 128x{tile.group(1)} s{tile.group(2)}" + (f" split{tile.group(3)}" if tile.group(3) not in (None, "1") else "")
    if "split_k_reduce" in name:
        return "split-K reduce"
    if "gemm_kernel" in name:
        return "fragment tile"
    return name.split("::")[-1][:40]


def segments(listed):
    out, current, after = [], [], "start"
    for k in listed:
        if is_product(k["name"]):
            current.append(k)
            continue
        if current:
            out.append((after, current))
            current = []
        after = short(k["name"])
    if current:
        out.append((after, current))
    return out


def main():
    own, both = segments(kernels(sys.argv[1])), segments(kernels(sys.argv[2]))
    rows_wanted = int(sys.argv[3]) if len(sys.argv) > 3 else 30
    if len(own) != len(both):
        print(f"warning: {len(own)} segments in the first profile, {len(both)} in the second: pairs may not match")
    rows = []
    for i, ((after, o), (_, a)) in enumerate(zip(own, both)):
        t_own, t_all = sum(k["us"] for k in o), sum(k["us"] for k in a)
        rows.append((t_own - t_all, i, after, t_own, t_all, o, a))
    print(f"products per forward: own {sum(r[3] for r in rows):.1f} us, with the libraries {sum(r[4] for r in rows):.1f} us")
    print(f"{'gap':>7s} {'seg':>4s}  {'after':24s} {'own':>7s} {'all':>7s}  own kernels (grid) | libraries' kernels")
    for gap, i, after, t_own, t_all, o, a in sorted(rows, key=lambda r: -r[0])[:rows_wanted]:
        mine = " + ".join(f"{short(k['name'])} {k['grid']}" for k in o)
        theirs = " + ".join(short(k["name"])[:32] for k in a)
        print(f"{gap:7.1f} {i:4d}  {after[:24]:24s} {t_own:7.1f} {t_all:7.1f}  {mine[:90]} | {theirs[:70]}")
    print("\nby the kernel the products follow:")
    totals = collections.defaultdict(lambda: [0.0, 0, 0.0, 0.0])
    for gap, _, after, t_own, t_all, _, _ in rows:
        t = totals[after]
        t[0] += gap
        t[1] += 1
        t[2] += t_own
        t[3] += t_all
    for after, (gap, n, t_own, t_all) in sorted(totals.items(), key=lambda kv: -kv[1][0]):
        print(f"  {after[:30]:30s} gap {gap:7.1f} us in {n:3d} segments (own {t_own:7.1f}, all {t_all:7.1f})")
    if len(sys.argv) > 4:
        for i in map(int, sys.argv[4].split(",")):
            print(f"\nsegment {i}, after {own[i][0]}:")
            for k in own[i][1]:
                print(f"   own {k['us']:7.1f} us  {short(k['name'])} {k['grid']}")
            for k in both[i][1]:
                print(f"   all {k['us']:7.1f} us  {short(k['name'])[:60]} {k['grid']}")


if __name__ == "__main__":
    main()
