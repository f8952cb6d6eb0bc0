// The kinds of elementwise work the op front halves hand to a backend: one set of names for the CPU
// and GPU kernels alike, so that dispatch passes them through unchanged.
#pragma once

namespace hd::ops {

enum class Activation { kGeluErf, kGeluTanh, kQuickGelu, kSilu };
enum class BinaryOp { kAdd, kMul };

}  // namespace hd::ops
