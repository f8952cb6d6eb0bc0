// `hipdiffusion bench` for a folder holding an SDXL UNet and a VAE without SDXL's text encoders (no whole
// generation is possible): the UNet and the VAE timed on their own, from random inputs of the shapes a
// generation gives them (prompt embeddings, pooled embedding and size ids for a text-time UNet).
#pragma once

#include <cstdint>
#include <string>

#include "ops/placement.h"
#include "tools/cli/flags.h"

namespace hd::cli {

struct ComponentBench {
  std::string model;        // a diffusers folder with unet/ and vae/
  std::string description;  // what the report calls it
  int64_t parameters = 0;   // 0: not known
  ops::Placement placement;
  int steps = 30, repeats = 5;
  float cfg_scale = 7.5f;  // above 1: the UNet runs on a batch of two, as classifier-free guidance does
};

// Whether the model at `path` can only be benchmarked by components (its UNet takes SDXL's text-time
// conditioning and the model lacks SDXL's text encoders: a UNet and a VAE).
bool needs_component_bench(const std::string& path);

// Times, after a warm-up: one UNet step (median; each step waited for), `steps` UNet steps back to back,
// and the VAE decode of one image to the host; peak device memory and the decode's own; --width/--height
// (the model's size by default), --vae-tiling[-blended], --profile and --json as the whole-generation bench.
int run_component_bench(const ComponentBench& bench, const Flags& flags);

}  // namespace hd::cli
