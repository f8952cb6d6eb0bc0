// Front half of group_norm and layer_norm: argument checks, then the device's kernel.
#include <cmath>

#include "ops/cpu/cpu_ops.h"
#include "ops/op_checks.h"
#include "ops/ops.h"
#include "ops/profiler.h"
#if defined(HD_WITH_GPU)
#include "ops/gpu/gpu_ops.h"
#endif

namespace hd::ops {

namespace {
void check_affine(std::string_view op, int min_rank, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                  float eps, const Tensor& out) {
  const Device& dev = x.device;
  check_operand(op, "input", x, dev);
  check_operand(op, "gamma", gamma, dev);
  check_operand(op, "beta", beta, dev);
  check_operand(op, "output", out, dev);
  HD_CHECK(x.rank() >= min_rank, op, ": input has shape ", x.shape.to_string(), ", expected rank >= ", min_rank);
  check_shape(op, "gamma", gamma, Shape{x.dim(-1)});
  check_shape(op, "beta", beta, Shape{x.dim(-1)});
  check_shape(op, "output", out, x.shape);
  HD_CHECK(std::isfinite(eps) && eps > 0.0f, op, ": eps ", eps, " must be positive");
}
}  // namespace

void group_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, int groups, float eps, bool fuse_silu,
                const Tensor& out) {
  const OpScope scope(fuse_silu ? "group_norm + silu" : "group_norm", x.device);
  check_affine("group_norm", 2, x, gamma, beta, eps, out);
  HD_CHECK(groups >= 1 && x.dim(-1) % groups == 0, "group_norm: ", x.dim(-1), " channels of ", x.shape.to_string(),
           " do not split into ", groups, " groups");
  if (x.device.is_cpu()) return cpu::group_norm(x, gamma, beta, groups, eps, fuse_silu, out);
#if defined(HD_WITH_GPU)
  gpu::group_norm(x, gamma, beta, groups, eps, fuse_silu, out);
#else
  no_kernel("group_norm", x.device);
#endif
}

void layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps, const Tensor& out) {
  const OpScope scope("layer_norm", x.device);
  check_affine("layer_norm", 1, x, gamma, beta, eps, out);
  if (x.device.is_cpu()) return cpu::layer_norm(x, gamma, beta, eps, out);
#if defined(HD_WITH_GPU)
  gpu::layer_norm(x, gamma, beta, eps, out);
#else
  no_kernel("layer_norm", x.device);
#endif
}

}  // namespace hd::ops
