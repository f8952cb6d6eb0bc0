// Memory for an op's temporaries (GroupNorm's partial sums on the GPU): one growing buffer per device,
// valid until the next call for that device. Ops on one device run in order (one stream), so a later op
// may reuse what an earlier one left. The arena takes this over once the GPU pipeline plans its memory.
// (Host code only: it lives in core so that no GPU compiler sees the standard containers behind it.)
#pragma once

#include <cstddef>

#include "core/device.h"

namespace hd {

void* scratch(const Device& device, size_t bytes);

}  // namespace hd
