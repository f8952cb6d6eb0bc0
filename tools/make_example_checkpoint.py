#!/usr/bin/env python3
"""Writes data/tiny-sd15-structure.safetensors: a few kilobytes with the tensor names and layout of an
SD1.5 single-file (LDM) checkpoint at tiny widths, for `hipdiffusion info` in the README.

It is a structural sample, not a model: the widths are tiny and the values are a fixed pattern. It uses
only the Python standard library, so it runs anywhere. Rerun it to regenerate the file byte for byte.
"""
import json
import struct
import sys
from pathlib import Path

# (name, shape) in LDM naming. The cross-attention key keeps SD1.x's 768-wide context, which is what
# tells SD1.x apart; every other width is shrunk.
TENSORS = [
    ("model.diffusion_model.input_blocks.0.0.weight", [8, 4, 3, 3]),
    ("model.diffusion_model.input_blocks.0.0.bias", [8]),
    ("model.diffusion_model.time_embed.0.weight", [32, 8]),
    ("model.diffusion_model.input_blocks.1.1.proj_in.weight", [8, 8, 1, 1]),
    ("model.diffusion_model.input_blocks.1.1.transformer_blocks.0.attn2.to_k.weight", [8, 768]),
    ("model.diffusion_model.out.2.weight", [4, 8, 3, 3]),
    ("first_stage_model.decoder.conv_in.weight", [8, 4, 3, 3]),
    ("first_stage_model.encoder.conv_in.weight", [8, 3, 3, 3]),
    ("first_stage_model.post_quant_conv.weight", [4, 4, 1, 1]),
    ("cond_stage_model.transformer.text_model.embeddings.token_embedding.weight", [16, 768]),
    ("cond_stage_model.transformer.text_model.final_layer_norm.weight", [768]),
]


def f16_pattern(count: int, seed: int) -> bytes:
    """Small distinct f16 values from a linear congruential sequence (deterministic, no numpy)."""
    out = bytearray()
    state = seed
    for _ in range(count):
        state = (state * 1103515245 + 12345) & 0x7FFFFFFF
        value = ((state >> 8) % 2001 - 1000) / 10000.0
        out += struct.pack("<e", value)
    return bytes(out)


def main() -> None:
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent / "data" / "tiny-sd15-structure.safetensors"
    header = {"__metadata__": {"format": "pt", "note": "hipDiffusion structural sample, not a usable model"}}
    blobs = []
    offset = 0
    for i, (name, shape) in enumerate(sorted(TENSORS)):
        count = 1
        for d in shape:
            count *= d
        blob = f16_pattern(count, i + 1)
        header[name] = {"dtype": "F16", "shape": shape, "data_offsets": [offset, offset + len(blob)]}
        offset += len(blob)
        blobs.append(blob)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))
    print(f"wrote {path} ({path.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
