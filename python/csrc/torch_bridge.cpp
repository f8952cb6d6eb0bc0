#include "torch_bridge.h"

#include <c10/util/Exception.h>

#include "core/error.h"

namespace hd::torch_ext {

namespace {

DType engine_dtype(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case at::kFloat: return DType::kF32;
    case at::kHalf: return DType::kF16;
    case at::kBFloat16: return DType::kBF16;
    default:
      TORCH_CHECK_NOT_IMPLEMENTED(false, "hipdiffusion: ", t.scalar_type(),
                                  " tensors have no kernels (float32 on the CPU; float16, bfloat16 on a GPU)");
  }
}

}  // namespace

Tensor view_of(const at::Tensor& t) {
  TORCH_CHECK_VALUE(t.is_contiguous(), "hipdiffusion: expected a contiguous tensor, got strides ", t.strides());
  TORCH_CHECK_VALUE(t.dim() <= kMaxRank, "hipdiffusion: tensors of rank ", t.dim(), " are not supported (at most ",
                    kMaxRank, ")");
  Shape shape = Shape::of_rank(int(t.dim()));
  for (int i = 0; i < t.dim(); ++i) shape[i] = t.size(i);
  Tensor v = Tensor::contiguous(t.data_ptr(), engine_dtype(t), shape, engine_device(t));
  return v;
}

const Tensor* optional_view(const c10::optional<at::Tensor>& t, Tensor& storage) {
  if (!t.has_value() || !t->defined()) return nullptr;
  storage = view_of(*t);
  return &storage;
}

void run_translating_errors(const char* op, const std::function<void()>& body) {
  try {
    body();
  } catch (const Error& e) {
    switch (e.kind()) {
      case ErrorKind::kInvalidInput: TORCH_CHECK_VALUE(false, "hipdiffusion::", op, ": ", e.what());
      case ErrorKind::kUnsupported: TORCH_CHECK_NOT_IMPLEMENTED(false, "hipdiffusion::", op, ": ", e.what());
      case ErrorKind::kOutOfMemory: TORCH_CHECK_WITH(OutOfMemoryError, false, "hipdiffusion::", op, ": ", e.what());
      default: TORCH_CHECK(false, "hipdiffusion::", op, ": ", e.what());
    }
  }
}

}  // namespace hd::torch_ext
