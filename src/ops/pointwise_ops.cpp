// Front half of the activations, softmax and broadcasting elementwise ops.
#include <algorithm>

#include "ops/cpu/cpu_ops.h"
#include "ops/op_checks.h"
#include "ops/ops.h"
#include "ops/profiler.h"
#if defined(HD_WITH_GPU)
#include "ops/gpu/gpu_ops.h"
#endif

namespace hd::ops {

namespace {

void unary(const char* op, const Tensor& x, const Tensor& out, Activation kind) {
  const OpScope scope(op, x.device);
  check_operand(op, "input", x, x.device);
  check_operand(op, "output", out, x.device);
  check_shape(op, "output", out, x.shape);
  if (x.device.is_cpu()) return cpu::activation(x, kind, out);
#if defined(HD_WITH_GPU)
  gpu::activation(x, kind, out);
#else
  no_kernel(op, x.device);
#endif
}

// numpy's rule: align shapes on the right; each pair of dims equal or one of them 1.
Shape broadcast_shape(std::string_view op, const Shape& a, const Shape& b) {
  const int rank = std::max(a.rank(), b.rank());
  Shape s = Shape::of_rank(rank);
  for (int i = 0; i < rank; ++i) {
    const int64_t da = i < rank - a.rank() ? 1 : a[i - (rank - a.rank())];
    const int64_t db = i < rank - b.rank() ? 1 : b[i - (rank - b.rank())];
    HD_CHECK(da == db || da == 1 || db == 1, op, ": shapes ", a.to_string(), " and ", b.to_string(),
             " do not broadcast");
    s[i] = da == 1 ? db : da;
  }
  return s;
}

void binary(const char* op, const Tensor& a, const Tensor& b, const Tensor& out, BinaryOp kind) {
  const OpScope scope(op, a.device);
  check_operand(op, "a", a, a.device);
  check_operand(op, "b", b, a.device);
  check_operand(op, "output", out, a.device);
  check_shape(op, "output", out, broadcast_shape(op, a.shape, b.shape));
  if (a.device.is_cpu()) return cpu::binary(a, b, kind, out);
#if defined(HD_WITH_GPU)
  gpu::binary(a, b, kind, out);
#else
  no_kernel(op, a.device);
#endif
}

}  // namespace

void gelu(const Tensor& x, GeluApproximation approximation, const Tensor& out) {
  unary("gelu", x, out, approximation == GeluApproximation::kTanh ? Activation::kGeluTanh : Activation::kGeluErf);
}
void quick_gelu(const Tensor& x, const Tensor& out) { unary("quick_gelu", x, out, Activation::kQuickGelu); }
void silu(const Tensor& x, const Tensor& out) { unary("silu", x, out, Activation::kSilu); }

void geglu(const Tensor& x, GeluApproximation approximation, const Tensor& out) {
  const OpScope scope("geglu", x.device);
  check_operand("geglu", "input", x, x.device);
  check_operand("geglu", "output", out, x.device);
  HD_CHECK(x.rank() >= 1 && x.dim(-1) % 2 == 0, "geglu: input has shape ", x.shape.to_string(),
           ", expected an even last dimension [..., 2N]");
  Shape expected = x.shape;
  expected[x.rank() - 1] = x.dim(-1) / 2;
  check_shape("geglu", "output", out, expected);
  if (x.device.is_cpu()) return cpu::geglu(x, approximation, out);
#if defined(HD_WITH_GPU)
  gpu::geglu(x, approximation, out);
#else
  no_kernel("geglu", x.device);
#endif
}

void softmax(const Tensor& x, const Tensor& out) {
  const OpScope scope("softmax", x.device);
  check_operand("softmax", "input", x, x.device);
  check_operand("softmax", "output", out, x.device);
  HD_CHECK(x.rank() >= 1, "softmax: input must have at least one dimension");
  check_shape("softmax", "output", out, x.shape);
  if (!x.device.is_cpu()) {
#if defined(HD_WITH_GPU)
    return gpu::softmax(x, out);
#else
    no_kernel("softmax", x.device);
#endif
  }
  const int64_t cols = x.dim(-1);
  cpu::softmax_rows(x.ptr<float>(), out.ptr<float>(), cols == 0 ? 0 : x.numel() / cols, cols);
}

void add(const Tensor& a, const Tensor& b, const Tensor& out) { binary("add", a, b, out, BinaryOp::kAdd); }
void mul(const Tensor& a, const Tensor& b, const Tensor& out) { binary("mul", a, b, out, BinaryOp::kMul); }

void scale(const Tensor& x, float factor, const Tensor& out) {
  const OpScope scope("scale", x.device);
  check_operand("scale", "input", x, x.device);
  check_operand("scale", "output", out, x.device);
  check_shape("scale", "output", out, x.shape);
  if (x.device.is_cpu()) return cpu::scale(x, factor, out);
#if defined(HD_WITH_GPU)
  gpu::scale(x, factor, out);
#else
  no_kernel("scale", x.device);
#endif
}

}  // namespace hd::ops
