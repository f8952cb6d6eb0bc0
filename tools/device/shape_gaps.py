#!/usr/bin/env python3
"""Where our own kernels lose to the vendor libraries, shape by shape (issue 21): joins the tuning cache of
a `--kernels own` run with that of a `--kernels all` run of the same model (hipdiffusion's cache files,
ops/tuning/autotuner.h: key, choice, milliseconds; the last line for a key wins) and lists each GEMM or
convolution shape's best own time beside the best time with the libraries, largest loss first.

    shape_gaps.py OWN.tsv ALL.tsv [N]

Times are the autotuner's own measures of one call (per shape, not per UNet step: a shape that runs
several times a step counts once here)."""
import sys


def choices(path, tiles_only):
    out = {}
    for line in open(path, encoding="utf-8"):
        fields = line.rstrip("\n").split("\t")
        if len(fields) < 3 or fields[2] == "note" or not fields[0].startswith("gemm "):
            continue
        key = fields[0]
        if (" tiles only" in key) != tiles_only:
            continue
        out[key.replace(" tiles only", "")] = (fields[1], float(fields[2]))
    return out


own, both = choices(sys.argv[1], True), choices(sys.argv[2], False)
limit = int(sys.argv[3]) if len(sys.argv) > 3 else 30
rows = sorted(((o[1] - both[k][1], k, o, both[k]) for k, o in own.items() if k in both), reverse=True)
print(f"{len(rows)} shapes in both caches; own total {sum(r[2][1] for r in rows):.3f} ms, "
      f"with libraries {sum(r[3][1] for r in rows):.3f} ms (each shape once)")
print(f"{'loss ms':>8} {'own ms':>8} {'lib ms':>8} {'ratio':>6}  own choice / library choice  shape")
for loss, key, o, b in rows[:limit]:
    shape = key.split(": ", 1)[-1]
    print(f"{loss:8.4f} {o[1]:8.4f} {b[1]:8.4f} {o[1] / max(b[1], 1e-9):6.2f}  {o[0]} / {b[0]}  {shape}")
