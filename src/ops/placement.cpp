#include "ops/placement.h"

#include "core/error.h"
#include "ops/ops.h"

namespace hd::ops {

void Placement::validate() const {
  if (device.is_cpu()) {
    HD_CHECK_KIND(dtype == DType::kF32, ErrorKind::kUnsupported, "the CPU computes in f32, not ", dtype_name(dtype));
  } else {
    HD_CHECK_KIND(dtype == DType::kF16 || dtype == DType::kBF16, ErrorKind::kUnsupported, "a GPU computes in f16 or bf16, not ",
                  dtype_name(dtype));
  }
}

Placement Placement::parse(std::string_view device, std::string_view dtype) {
  Placement p{Device::parse(device), DType::kF32};
  if (p.device.is_gpu()) p.dtype = DType::kF16;
  if (!dtype.empty()) p.dtype = parse_dtype(dtype);
  p.validate();
  return p;
}

std::string Placement::to_string() const { return str_cat(device.to_string(), " ", dtype_name(dtype)); }

OwnedTensor place(const Tensor& t, const Placement& p) {
  // Convert where the data is, then move it: an upload of f32 would move twice the bytes.
  OwnedTensor converted(t.shape, p.dtype, t.device);
  if (t.dtype == p.dtype) {
    copy(t, converted);
  } else {
    convert(t, converted);
  }
  if (t.device == p.device) return converted;
  OwnedTensor moved(t.shape, p.dtype, p.device);
  copy(converted, moved);
  return moved;
}

OwnedTensor to_host_f32(const Tensor& t) { return place(t, Placement{Device::cpu(), DType::kF32}); }

}  // namespace hd::ops
