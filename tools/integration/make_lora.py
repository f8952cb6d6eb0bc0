#!/usr/bin/env python3
"""Writes a LoRA for SD1.x's UNet with random weights, in the kohya/diffusers key form that
AUTOMATIC1111's built-in Lora extension (and ComfyUI) read: `lora_unet_<block>_..._to_q.lora_down.weight`,
`.lora_up.weight` and `.alpha`, on every attention projection of the UNet (q, k, v, out; self- and
cross-attention). For the UI runs (tools/integration/a1111_run.py): a picture with the LoRA must differ
from one without, and be the same through the engine as through the UI's own UNet.

  usage: make_lora.py --out FILE [--rank 4] [--scale 0.05] [--seed 18]
"""
import argparse
import os

import torch
from safetensors.torch import save_file

# SD1.x's UNet: the channels of each down/up block with attention, and how many attentions each holds.
DOWN = [(0, 320), (1, 640), (2, 1280)]  # (block, channels), two attentions each
UP = [(1, 1280), (2, 640), (3, 320)]  # three attentions each
CONTEXT = 768


def attention_blocks():
    for block, channels in DOWN:
        for i in range(2):
            yield f"down_blocks_{block}_attentions_{i}", channels
    yield "mid_block_attentions_0", 1280
    for block, channels in UP:
        for i in range(3):
            yield f"up_blocks_{block}_attentions_{i}", channels


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--rank", type=int, default=4)
    parser.add_argument("--scale", type=float, default=0.05, help="standard deviation of the up and down weights")
    parser.add_argument("--seed", type=int, default=18)
    args = parser.parse_args()
    g = torch.Generator().manual_seed(args.seed)
    tensors = {}
    for block, channels in attention_blocks():
        for attention, context in (("attn1", channels), ("attn2", CONTEXT)):
            for projection, width_in in (("to_q", channels), ("to_k", context), ("to_v", context), ("to_out_0", channels)):
                key = f"lora_unet_{block}_transformer_blocks_0_{attention}_{projection}"
                tensors[f"{key}.lora_down.weight"] = torch.randn(args.rank, width_in, generator=g) * args.scale
                tensors[f"{key}.lora_up.weight"] = torch.randn(channels, args.rank, generator=g) * args.scale
                tensors[f"{key}.alpha"] = torch.tensor(float(args.rank))
    tensors = {k: v.to(torch.float16) for k, v in tensors.items()}
    partial = f"{args.out}.partial"  # renamed when whole: the run scripts take an existing file as done
    save_file(tensors, partial, metadata={"ss_network_module": "networks.lora", "ss_network_dim": str(args.rank)})
    os.replace(partial, args.out)
    print(f"{args.out}: {len(tensors) // 3} LoRA layers of rank {args.rank} on SD1.x's UNet attention")


if __name__ == "__main__":
    main()
