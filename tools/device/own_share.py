#!/usr/bin/env python3
"""What share of a tuning cache's GEMM/convolution choices went to our own kernels rather than a vendor
library (cuDNN, cuBLASLt; MIOpen, hipBLASLt, rocBLAS): issue 21's "share of the UNet the autotuner gives
our kernels". Reads the cache file hipdiffusion writes (ops/tuning/autotuner.h: the last line for a key
wins; "note" lines are the libraries' heuristic answers, not choices). Usage: own_share.py TUNING.tsv"""
import sys

VENDOR_PREFIXES = ("cudnn", "cublaslt", "miopen", "hipblaslt", "rocblas")

choices = {}
for line in open(sys.argv[1], encoding="utf-8"):
    fields = line.rstrip("\n").split("\t")
    # Choices made with the libraries allowed only (a --kernels own key says "tiles only").
    if len(fields) < 3 or fields[2] == "note" or not fields[0].startswith("gemm ") or " tiles only" in fields[0]:
        continue
    choices[fields[0]] = fields[1]
own = [k for k, v in choices.items() if not v.startswith(VENDOR_PREFIXES)]
print(f"{len(own)} of {len(choices)} GEMM/convolution shapes chose our own kernels")
for name in sorted(set(choices.values())):
    print(f"  {sum(v == name for v in choices.values()):3d}  {name}")
