#include "ops/op_checks.h"

namespace hd::ops {

namespace {

// Data present, on the op's device, in a dtype the device computes in.
void check_placed(std::string_view op, std::string_view what, const Tensor& t, const Device& device) {
  HD_CHECK(t.data != nullptr || t.numel() == 0, op, ": ", what, " has no data");
  HD_CHECK(t.device == device, op, ": ", what, " is on ", t.device.to_string(), " but the op runs on ",
           device.to_string());
  HD_CHECK_KIND(t.dtype == DType::kF32 || !device.is_cpu(), ErrorKind::kUnsupported, op, ": ", what, " is ",
                dtype_name(t.dtype), "; the CPU ops compute in f32");
}

}  // namespace

void check_operand(std::string_view op, std::string_view what, const Tensor& t, const Device& device) {
  check_placed(op, what, t, device);
  HD_CHECK_KIND(t.is_contiguous(), ErrorKind::kUnsupported, op, ": ", what, " ", t.describe(),
                " is not contiguous");
}

void check_rows(std::string_view op, std::string_view what, const Tensor& t, const Device& device) {
  check_placed(op, what, t, device);
  const bool rows = t.rank() == 3 && (t.dim(2) <= 1 || t.strides[2] == 1) && t.strides[1] >= t.dim(2) &&
                    (t.dim(0) <= 1 || t.strides[0] == t.dim(1) * t.strides[1]);
  HD_CHECK_KIND(rows, ErrorKind::kUnsupported, op, ": ", what, " ", t.describe(), " with strides ",
                t.strides.to_string(), " is not [B, L, W] rows of contiguous tokens");
}

void check_shape(std::string_view op, std::string_view what, const Tensor& t, const Shape& expected) {
  HD_CHECK(t.shape == expected, op, ": ", what, " has shape ", t.shape.to_string(), ", expected ",
           expected.to_string());
}

void check_rank(std::string_view op, std::string_view what, const Tensor& t, int rank) {
  HD_CHECK(t.rank() == rank, op, ": ", what, " has shape ", t.shape.to_string(), ", expected rank ", rank);
}

void check_log_sum_exp(std::string_view op, const Tensor& lse, const Tensor& q, int heads) {
  HD_CHECK(lse.dtype == DType::kF32, op, ": the log-sum-exp ", lse.describe(), " must be f32");
  check_shape(op, "log-sum-exp", lse, Shape{q.dim(0), heads, q.dim(1)});
  check_operand(op, "log-sum-exp", lse, q.device);
}

void no_kernel(std::string_view op, const Device& device) {
  throw Error(ErrorKind::kUnsupported,
              str_cat(op, ": no kernel for ", device.to_string(), " yet; the GPU backend is not built (run on cpu)"));
}

}  // namespace hd::ops
