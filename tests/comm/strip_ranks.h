// The tests' image split on the CPU: the ranks of an in-process group, each with its own exact
// ImageSplit, and a sample's rows cut out as a strip.
#pragma once

#include <cstdint>
#include <functional>

#include "comm/image_split.h"
#include "core/tensor.h"

namespace hd::test {

// work(rank, split) on every rank of a fresh in-process group of `ranks` (a failing rank ends the others).
void on_strips(int ranks, const std::function<void(int rank, comm::ImageSplit& split)>& work);

// Rows [first, first + rows) of every sample of x [N, H, ...], dense, on the host.
OwnedTensor rows_of(const Tensor& x, int64_t first, int64_t rows);

}  // namespace hd::test
