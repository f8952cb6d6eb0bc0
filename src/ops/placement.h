// Where a model computes: a device and the element type of its weights and activations (f32 on the
// CPU; f16 or bf16 on a GPU). Helpers move host f32 data there and back.
#pragma once

#include <string>
#include <string_view>

#include "core/tensor.h"

namespace hd::ops {

struct Placement {
  Device device;
  DType dtype = DType::kF32;

  // Throws when the pair cannot compute: the CPU ops take f32 only, the GPU matrix kernels f16/bf16.
  void validate() const;
  // A device by name ("cpu", "cuda:0", "hip:1") and a dtype by name ("f32", "f16", "bf16"; empty: f32 on
  // the CPU, f16 on a GPU), validated.
  static Placement parse(std::string_view device, std::string_view dtype = {});
  std::string to_string() const;  // "cuda:0 f16"
};

// A dense copy of `t` (any device, any float dtype) in `p`'s dtype on `p`'s device.
OwnedTensor place(const Tensor& t, const Placement& p);
// A dense f32 host copy of `t` (any device, any float dtype).
OwnedTensor to_host_f32(const Tensor& t);

}  // namespace hd::ops
