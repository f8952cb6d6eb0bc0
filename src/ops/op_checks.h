// Checks shared by every op's front half, so that each backend receives validated arguments and every
// op words its errors the same way: "<op>: <what> has shape [..], expected [..]".
#pragma once

#include <string_view>

#include "core/error.h"
#include "core/tensor.h"

namespace hd::ops {

// All tensors on one device, of the op's dtype, dense (views with gaps only where an op says so).
void check_operand(std::string_view op, std::string_view what, const Tensor& t, const Device& device);
// The same, except that `t` [B, L, W] may be a column range of wider rows: each of its L tokens W
// contiguous elements, strides[1] apart, and each batch entry L such rows (a query, key or value that is
// a slice of one stacked projection's output).
void check_rows(std::string_view op, std::string_view what, const Tensor& t, const Device& device);
void check_shape(std::string_view op, std::string_view what, const Tensor& t, const Shape& expected);
void check_rank(std::string_view op, std::string_view what, const Tensor& t, int rank);
// An attention's log-sum-exp: dense [B, heads, Lq] f32 on the query's device.
void check_log_sum_exp(std::string_view op, const Tensor& lse, const Tensor& q, int heads);
// The error for an op whose kernel for `device` does not exist yet.
[[noreturn]] void no_kernel(std::string_view op, const Device& device);

}  // namespace hd::ops
