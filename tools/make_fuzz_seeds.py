#!/usr/bin/env python3
"""Writes the seed corpus of the safetensors fuzzer (fuzz/corpus/): small valid files of each shape the
reader accepts, and near-misses of each validation, so that the fuzzer starts next to every branch.
Standard library only; rerun to regenerate the same bytes."""
import json
import struct
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "fuzz" / "corpus"


def file_bytes(header, data=b"", declared=None, raw_header=None):
    text = raw_header if raw_header is not None else json.dumps(header, separators=(",", ":")).encode()
    n = len(text) if declared is None else declared
    return struct.pack("<Q", n) + text + data


def entry(dtype, shape, begin, end):
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


SEEDS = {
    "empty_header": file_bytes({}),
    "metadata_only": file_bytes({"__metadata__": {"format": "pt", "note": "x"}}),
    "f32_f16_bf16": file_bytes({"a": entry("F32", [2, 2], 0, 16), "b": entry("F16", [3], 16, 22),
                                "c": entry("BF16", [1, 1], 22, 24)}, bytes(range(24))),
    "i64_and_zero_size": file_bytes({"ids": entry("I64", [1, 2], 0, 16), "z": entry("F32", [0, 3], 16, 16)}, bytes(16)),
    "gap": file_bytes({"a": entry("F32", [1], 0, 4), "b": entry("F32", [1], 8, 12)}, bytes(12)),
    "overlap": file_bytes({"a": entry("F32", [2], 0, 8), "b": entry("F32", [1], 4, 8)}, bytes(8)),
    "trailing": file_bytes({"a": entry("F32", [1], 0, 4)}, bytes(6)),
    "bad_dtype": file_bytes({"a": entry("F99", [1], 0, 4)}, bytes(4)),
    "length_mismatch": file_bytes({"a": entry("F32", [3], 0, 8)}, bytes(8)),
    "overflow_shape": file_bytes({"a": entry("F32", [2**62, 8], 0, 4)}, bytes(4)),
    "header_past_end": file_bytes({}, declared=4096),
    "duplicate": file_bytes(None, bytes(8), raw_header=b'{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},'
                                                    b'"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}'),
    "bad_utf8": file_bytes(None, raw_header=b'{"__metadata__":{"k":"\xff"}}'),
    "deep_nesting": file_bytes(None, raw_header=b'{"a":' + b"[" * 64 + b"]" * 64 + b"}"),
}


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    for name, data in SEEDS.items():
        (OUT / f"{name}.safetensors").write_bytes(data)
    print(f"wrote {len(SEEDS)} seeds to {OUT}")


if __name__ == "__main__":
    main()
