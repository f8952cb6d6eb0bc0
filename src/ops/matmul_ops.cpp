// Front half of conv2d, linear and batched_matmul: argument checks, then the device's kernel.
#include "ops/cpu/cpu_ops.h"
#include "ops/op_checks.h"
#include "ops/ops.h"
#include "ops/profiler.h"
#if defined(HD_WITH_GPU)
#include "ops/gpu/gpu_ops.h"
#endif

namespace hd::ops {

Shape conv2d_output_shape(const Shape& x, const Shape& w, Conv2dParams p) {
  HD_CHECK(x.rank() == 4, "conv2d: input has shape ", x.to_string(), ", expected [N, H, W, Cin]");
  HD_CHECK(w.rank() == 4, "conv2d: weight has shape ", w.to_string(), ", expected [Cout, kh, kw, Cin]");
  HD_CHECK(w[3] == x[3], "conv2d: weight ", w.to_string(), " expects ", w[3], " input channels but the input ",
           x.to_string(), " has ", x[3]);
  HD_CHECK(p.stride >= 1 && p.padding >= 0 && p.extra_end_padding >= 0, "conv2d: stride ", p.stride, " and padding ",
           p.padding, "+", p.extra_end_padding, " must be >= 1 and >= 0");
  HD_CHECK(w[1] >= 1 && w[2] >= 1 && w[3] >= 1, "conv2d: empty kernel ", w.to_string());
  const int64_t pad = 2 * p.padding + p.extra_end_padding;
  const int64_t h = x[1] + pad - w[1], wd = x[2] + pad - w[2];
  HD_CHECK(h >= 0 && wd >= 0, "conv2d: kernel ", w[1], "x", w[2], " does not fit the padded ", x[1], "x", x[2],
           " input");
  return Shape{x[0], h / p.stride + 1, wd / p.stride + 1, w[0]};
}

void conv2d(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor* residual, Conv2dParams p,
            const Tensor& out) {
  const Device& dev = x.device;
  const OpScope scope(w.rank() == 4 && w.dim(1) == 1 && w.dim(2) == 1 ? "conv2d 1x1" : "conv2d", dev);
  check_operand("conv2d", "input", x, dev);
  check_operand("conv2d", "weight", w, dev);
  check_operand("conv2d", "output", out, dev);
  const Shape expected = conv2d_output_shape(x.shape, w.shape, p);
  check_shape("conv2d", "output", out, expected);
  if (bias) {
    check_operand("conv2d", "bias", *bias, dev);
    check_shape("conv2d", "bias", *bias, Shape{w.dim(0)});
  }
  if (residual) {
    check_operand("conv2d", "residual", *residual, dev);
    check_shape("conv2d", "residual", *residual, expected);
  }
  if (dev.is_cpu()) return cpu::conv2d(x, w, bias, residual, p, out);
#if defined(HD_WITH_GPU)
  gpu::conv2d(x, w, bias, residual, p, out);
#else
  no_kernel("conv2d", dev);
#endif
}

void upsample_conv2d(const Tensor& x, const Tensor& w, const Tensor* phases, const Tensor* bias,
                     const Tensor& out) {
  const Device& dev = x.device;
  const OpScope scope("upsample conv2d", dev);
  constexpr const char* op = "upsample_conv2d";
  check_operand(op, "input", x, dev);
  check_operand(op, "weight", w, dev);
  check_operand(op, "output", out, dev);
  check_rank(op, "input", x, 4);
  check_rank(op, "weight", w, 4);
  check_shape(op, "weight", w, Shape{w.dim(0), 3, 3, x.dim(3)});
  const Shape upsampled{x.dim(0), 2 * x.dim(1), 2 * x.dim(2), x.dim(3)};
  check_shape(op, "output", out, Shape{x.dim(0), 2 * x.dim(1), 2 * x.dim(2), w.dim(0)});
  if (bias) {
    check_operand(op, "bias", *bias, dev);
    check_shape(op, "bias", *bias, Shape{w.dim(0)});
  }
  if (phases) {
    check_operand(op, "phases", *phases, dev);
    check_shape(op, "phases", *phases, Shape{2, 2, w.dim(0), 2, 2, x.dim(3)});
  }
  if (dev.is_cpu()) {
    const OwnedTensor up(upsampled, x.dtype);
    cpu::upsample_nearest_2x(x, up);
    return cpu::conv2d(up, w, bias, nullptr, Conv2dParams{1, 1, 0}, out);
  }
#if defined(HD_WITH_GPU)
  gpu::upsample_conv2d(x, w, phases, bias, out);
#else
  no_kernel(op, dev);
#endif
}

void upsample_conv2d_phases(const Tensor& w, const Tensor& out) {
  const Device& dev = w.device;
  const OpScope scope("upsample conv2d phases", dev);
  check_operand("upsample_conv2d_phases", "weight", w, dev);
  check_operand("upsample_conv2d_phases", "output", out, dev);
  check_rank("upsample_conv2d_phases", "weight", w, 4);
  check_shape("upsample_conv2d_phases", "weight", w, Shape{w.dim(0), 3, 3, w.dim(3)});
  check_shape("upsample_conv2d_phases", "output", out, Shape{2, 2, w.dim(0), 2, 2, w.dim(3)});
  if (dev.is_cpu()) return cpu::upsample_conv2d_phases(w, out);
#if defined(HD_WITH_GPU)
  gpu::upsample_conv2d_phases(w, out);
#else
  no_kernel("upsample_conv2d_phases", dev);
#endif
}

namespace {

// linear's and linear_geglu's operands but the output: x [..., K], w [N, K], bias [N]. Returns the
// projection's shape, [..., N].
Shape check_projection(const char* op, const Tensor& x, const Tensor& w, const Tensor* bias) {
  const Device& dev = x.device;
  check_operand(op, "input", x, dev);
  check_operand(op, "weight", w, dev);
  check_rank(op, "weight", w, 2);
  HD_CHECK(x.rank() >= 1 && x.dim(-1) == w.dim(1), op, ": input has shape ", x.shape.to_string(),
           " but the weight ", w.shape.to_string(), " expects ", w.dim(1), " features");
  if (bias) {
    check_operand(op, "bias", *bias, dev);
    check_shape(op, "bias", *bias, Shape{w.dim(0)});
  }
  Shape projected = x.shape;
  projected[projected.rank() - 1] = w.dim(0);
  return projected;
}

}  // namespace

void linear(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor* residual, const Tensor& out) {
  const Device& dev = x.device;
  const OpScope scope("linear", dev);
  const Shape expected = check_projection("linear", x, w, bias);
  check_operand("linear", "output", out, dev);
  check_shape("linear", "output", out, expected);
  if (residual) {
    check_operand("linear", "residual", *residual, dev);
    check_shape("linear", "residual", *residual, expected);
  }
  if (dev.is_cpu()) return cpu::linear(x, w, bias, residual, out);
#if defined(HD_WITH_GPU)
  gpu::linear(x, w, bias, residual, out);
#else
  no_kernel("linear", dev);
#endif
}

void linear_geglu(const Tensor& x, const Tensor& w, const Tensor* bias, GeluApproximation approximation,
                  const Tensor& out) {
  const Device& dev = x.device;
  const OpScope scope("linear geglu", dev);
  const Shape projected = check_projection("linear_geglu", x, w, bias);
  HD_CHECK(w.dim(0) % 2 == 0, "linear_geglu: the weight ", w.shape.to_string(),
           " must project to an even width (a hidden half and a gate half)");
  Shape expected = projected;
  expected[expected.rank() - 1] = w.dim(0) / 2;
  check_operand("linear_geglu", "output", out, dev);
  check_shape("linear_geglu", "output", out, expected);
  if (dev.is_cpu()) {
    const OwnedTensor p(projected, out.dtype);
    cpu::linear(x, w, bias, nullptr, p);
    return cpu::geglu(p, approximation, out);
  }
#if defined(HD_WITH_GPU)
  gpu::linear_geglu(x, w, bias, approximation, out);
#else
  no_kernel("linear_geglu", dev);
#endif
}

void batched_matmul(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b, float alpha,
                    const Tensor& out) {
  const Device& dev = a.device;
  const OpScope scope("batched_matmul", dev);
  check_operand("batched_matmul", "a", a, dev);
  check_operand("batched_matmul", "b", b, dev);
  check_operand("batched_matmul", "output", out, dev);
  check_rank("batched_matmul", "a", a, 3);
  check_rank("batched_matmul", "b", b, 3);
  const int64_t m = transpose_a ? a.dim(2) : a.dim(1), ka = transpose_a ? a.dim(1) : a.dim(2);
  const int64_t kb = transpose_b ? b.dim(2) : b.dim(1), n = transpose_b ? b.dim(1) : b.dim(2);
  HD_CHECK(a.dim(0) == b.dim(0) && ka == kb, "batched_matmul: cannot multiply ", a.shape.to_string(),
           transpose_a ? "ᵀ" : "", " by ", b.shape.to_string(), transpose_b ? "ᵀ" : "");
  check_shape("batched_matmul", "output", out, Shape{a.dim(0), m, n});
  if (dev.is_cpu()) return cpu::batched_matmul(a, b, transpose_a, transpose_b, alpha, out);
#if defined(HD_WITH_GPU)
  gpu::batched_matmul(a, b, transpose_a, transpose_b, alpha, out);
#else
  no_kernel("batched_matmul", dev);
#endif
}

}  // namespace hd::ops
