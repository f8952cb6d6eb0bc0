// GroupNorm (+SiLU) with each block's slice of the input held in registers (group_norm_resident.cu): one
// kernel a call where a block can hold a sample's chunk of channels, or two over slices of the pixels.
// norm.cu's group_norm asks group_norm_path_for which to run.
#pragma once

#include "core/tensor.h"
#include "ops/gpu/gpu_ops.h"

namespace hd::gpu {

// Whether the one-kernel path takes x in `groups` groups: 16-bit types, 16-byte aligned tensors, C a multiple
// of 8 with groups of at least 2 channels and at most 4 groups to a 16-byte-aligned chunk of channels, and
// a sample's chunk small enough for one block to hold (at most 8 vectors of 8 channels a thread: SD's
// 32x32 level, 1024 pixels at 40-channel chunks, fits; its 64x64 level does not).
bool group_norm_fits_resident(const Tensor& x, const Tensor& gamma, const Tensor& beta, int groups,
                              const Tensor& out);
// Whether the sliced path takes it: as above, with any number of pixels.
bool group_norm_fits_slices(const Tensor& x, const Tensor& gamma, const Tensor& beta, int groups,
                            const Tensor& out);
// What GroupNormPath::kAuto runs: kResident, kSlices or kTwoPass.
GroupNormPath group_norm_path_for(const Tensor& x, const Tensor& gamma, const Tensor& beta, int groups,
                                  const Tensor& out);
// Each kUnsupported where it does not fit (or where a channel offset, [N, C] of x's dtype as gpu::group_norm
// takes it, is not 16-byte aligned).
void group_norm_resident(const Tensor& x, const Tensor& gamma, const Tensor& beta, int groups, float eps,
                         bool fuse_silu, const Tensor& out, const Tensor* channel_offset);
void group_norm_slices(const Tensor& x, const Tensor& gamma, const Tensor& beta, int groups, float eps,
                       bool fuse_silu, const Tensor& out, const Tensor* channel_offset);

}  // namespace hd::gpu
