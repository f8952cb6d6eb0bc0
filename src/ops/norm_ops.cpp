// Front half of group_norm and layer_norm: argument checks, then the device's kernel.
#include <algorithm>
#include <cmath>

#include "ops/cpu/cpu_ops.h"
#include "ops/op_checks.h"
#include "ops/ops.h"
#include "ops/placement.h"
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

void group_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, int groups, float eps,
                bool fuse_silu, const Tensor& out, const Tensor* channel_offset) {
  const OpScope scope(fuse_silu ? "group_norm + silu" : "group_norm", x.device);
  check_affine("group_norm", 2, x, gamma, beta, eps, out);
  HD_CHECK(groups >= 1 && x.dim(-1) % groups == 0, "group_norm: ", x.dim(-1), " channels of ", x.shape.to_string(),
           " do not split into ", groups, " groups");
  // A channel offset's dtype is checked where the rule is: the CPU's f32 (check_operand), the GPU's
  // match with x (gpu::group_norm).
  if (channel_offset != nullptr) {
    check_operand("group_norm", "channel offset", *channel_offset, x.device);
    check_shape("group_norm", "channel offset", *channel_offset, Shape{x.dim(0), x.dim(-1)});
  }
  if (x.device.is_cpu()) return cpu::group_norm(x, gamma, beta, groups, eps, fuse_silu, out, channel_offset);
#if defined(HD_WITH_GPU)
  gpu::group_norm(x, gamma, beta, groups, eps, fuse_silu, out, channel_offset);
#else
  no_kernel("group_norm", x.device);
#endif
}

void group_statistics(const Tensor& x, int groups, const Tensor& stats) {
  const OpScope scope("group_statistics", x.device);
  HD_CHECK(x.data != nullptr || x.numel() == 0, "group_statistics: input has no data");
  check_rank("group_statistics", "input", x, 4);
  HD_CHECK_KIND(x.strides[3] == 1, ErrorKind::kUnsupported, "group_statistics: input ", x.describe(),
                " has strided channels");
  HD_CHECK_KIND(x.dtype == DType::kF32 || !x.device.is_cpu(), ErrorKind::kUnsupported,
                "group_statistics: input is ", dtype_name(x.dtype), "; the CPU ops compute in f32");
  HD_CHECK(x.dim(1) * x.dim(2) > 0, "group_statistics: input ", x.describe(), " has no pixels");
  HD_CHECK(groups >= 1 && x.dim(3) % groups == 0, "group_statistics: ", x.dim(3), " channels of ", x.shape.to_string(),
           " do not split into ", groups, " groups");
  check_operand("group_statistics", "statistics", stats, x.device);
  HD_CHECK(stats.dtype == DType::kF32, "group_statistics: statistics are ", dtype_name(stats.dtype), ", expected f32");
  check_shape("group_statistics", "statistics", stats, Shape{x.dim(0), groups, 2});
  if (x.device.is_cpu()) return cpu::group_statistics(x, groups, stats);
#if defined(HD_WITH_GPU)
  gpu::group_statistics(x, groups, stats);
#else
  no_kernel("group_statistics", x.device);
#endif
}

namespace {

// Checks shared by group_norm_affine and group_norm_combine: parts [P, N, groups, 2] f32 dense, a
// positive pixel count per part, gamma and beta [C] splitting into the groups.
void check_parts(const char* op, const Tensor& parts, const std::vector<int64_t>& positions, const Tensor& gamma,
                 const Tensor& beta, float eps) {
  HD_CHECK(parts.dtype == DType::kF32 && parts.is_contiguous() && parts.rank() == 4 && parts.dim(3) == 2 &&
               parts.dim(0) >= 1,
           op, ": parts ", parts.describe(), " must be f32 [P, N, groups, 2]");
  HD_CHECK(int64_t(positions.size()) == parts.dim(0), op, ": ", positions.size(), " pixel counts for ",
           parts.dim(0), " parts");
  HD_CHECK(std::all_of(positions.begin(), positions.end(), [](int64_t p) { return p > 0; }), op,
           ": a part has no pixels");
  HD_CHECK(gamma.rank() == 1 && beta.shape == gamma.shape && gamma.numel() % parts.dim(2) == 0, op, ": gamma ",
           gamma.describe(), " and beta ", beta.describe(), " do not fit ", parts.dim(2), " groups");
  HD_CHECK(std::isfinite(eps) && eps > 0.0f, op, ": eps ", eps, " must be positive");
}

}  // namespace

OwnedTensor group_norm_affine(const Tensor& parts, const std::vector<int64_t>& positions, const Tensor& gamma,
                              const Tensor& beta, float eps) {
  HD_CHECK(parts.device.is_cpu(), "group_norm_affine: parts ", parts.describe(), " must be on the host");
  check_parts("group_norm_affine", parts, positions, gamma, beta, eps);
  const OwnedTensor g = to_host_f32(gamma), b = to_host_f32(beta);
  OwnedTensor affine(Shape{parts.dim(1), gamma.numel(), 2}, DType::kF32);
  cpu::group_norm_combine(parts, positions, g, b, eps, affine);
  return affine;
}

void group_norm_combine(const Tensor& parts, const std::vector<int64_t>& positions, const Tensor& gamma,
                        const Tensor& beta, float eps, const Tensor& affine) {
  const OpScope scope("group_norm_combine", parts.device);
  check_parts("group_norm_combine", parts, positions, gamma, beta, eps);
  check_operand("group_norm_combine", "gamma", gamma, parts.device);
  check_operand("group_norm_combine", "beta", beta, parts.device);
  check_operand("group_norm_combine", "affine", affine, parts.device);
  HD_CHECK(affine.dtype == DType::kF32 && gamma.dtype == beta.dtype, "group_norm_combine: affine ",
           affine.describe(), " must be f32, gamma ", gamma.describe(), " and beta ", beta.describe(), " of one dtype");
  check_shape("group_norm_combine", "affine", affine, Shape{parts.dim(1), gamma.numel(), 2});
  if (parts.device.is_cpu()) return cpu::group_norm_combine(parts, positions, gamma, beta, eps, affine);
#if defined(HD_WITH_GPU)
  gpu::group_norm_combine(parts, positions, gamma, beta, eps, affine);
#else
  no_kernel("group_norm_combine", parts.device);
#endif
}

void group_norm_apply(const Tensor& x, const Tensor& affine, bool fuse_silu, const Tensor& out) {
  const OpScope scope(fuse_silu ? "group_norm_apply + silu" : "group_norm_apply", x.device);
  check_operand("group_norm_apply", "input", x, x.device);
  check_operand("group_norm_apply", "output", out, x.device);
  HD_CHECK(x.rank() >= 2, "group_norm_apply: input has shape ", x.shape.to_string(), ", expected rank >= 2");
  check_shape("group_norm_apply", "output", out, x.shape);
  HD_CHECK(affine.device == x.device && affine.dtype == DType::kF32 && affine.is_contiguous(),
           "group_norm_apply: affine ", affine.describe(), " must be dense f32 on ", x.device.to_string());
  check_shape("group_norm_apply", "affine", affine, Shape{x.dim(0), x.dim(-1), 2});
  if (x.device.is_cpu()) return cpu::group_norm_apply(x, affine, fuse_silu, out);
#if defined(HD_WITH_GPU)
  gpu::group_norm_apply(x, affine, fuse_silu, out);
#else
  no_kernel("group_norm_apply", x.device);
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
