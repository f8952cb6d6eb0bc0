// Front half of the gradients: argument checks, then the device's kernel. Attention's GPU kernel takes
// f16/bf16 heads of a multiple of 8 up to 160; other inputs get an error that says so (the PyTorch
// extension routes those to PyTorch's own gradient and counts them, python/hipdiffusion/fallback.py).
#include <cmath>
#include <utility>

#include "ops/cpu/cpu_ops.h"
#include "ops/op_checks.h"
#include "ops/ops.h"
#include "ops/profiler.h"
#if defined(HD_WITH_GPU)
#include "ops/gpu/gpu_ops.h"
#endif

namespace hd::ops {

namespace {

using Operands = std::initializer_list<std::pair<const char*, const Tensor*>>;

void check_operands(std::string_view op, const Device& dev, DType dtype, Operands operands) {
  for (const auto& [what, t] : operands) {
    check_operand(op, what, *t, dev);
    HD_CHECK(t->dtype == dtype, op, ": ", what, " ", t->describe(), " is not ", dtype_name(dtype));
  }
}

}  // namespace

void attention_backward(const Tensor& grad_out, const Tensor& q, const Tensor& k, const Tensor& v,
                        const Tensor& out, AttentionParams p, const Tensor& grad_q, const Tensor& grad_k,
                        const Tensor& grad_v, const Tensor* lse) {
  constexpr std::string_view op = "attention_backward";
  const OpScope scope("attention_backward", q.device);
  check_operands(op, q.device, q.dtype,
                 {{"query", &q}, {"key", &k}, {"value", &v}, {"output", &out}, {"output gradient", &grad_out},
                  {"query gradient", &grad_q}, {"key gradient", &grad_k}, {"value gradient", &grad_v}});
  check_rank(op, "query", q, 3);
  check_rank(op, "key", k, 3);
  HD_CHECK(p.heads >= 1 && q.dim(2) % p.heads == 0, op, ": width ", q.dim(2), " of query ", q.shape.to_string(),
           " is not divisible into ", p.heads, " heads");
  check_shape(op, "key", k, Shape{q.dim(0), k.dim(1), q.dim(2)});
  check_shape(op, "value", v, k.shape);
  check_shape(op, "output", out, q.shape);
  check_shape(op, "output gradient", grad_out, q.shape);
  check_shape(op, "query gradient", grad_q, q.shape);
  check_shape(op, "key gradient", grad_k, k.shape);
  check_shape(op, "value gradient", grad_v, k.shape);
  HD_CHECK(k.dim(1) > 0 || q.dim(1) == 0, op, ": no keys for ", q.dim(1), " queries");
  if (lse != nullptr) check_log_sum_exp(op, *lse, q, p.heads);
  // The CPU's blocks of queries recompute their softmax whole (the log-sum-exp would save nothing there).
  if (q.device.is_cpu()) return cpu::attention_backward(grad_out, q, k, v, out, p, grad_q, grad_k, grad_v);
#if defined(HD_WITH_GPU)
  gpu::attention_backward(grad_out, q, k, v, out, p.heads, p.causal, p.scale, grad_q, grad_k, grad_v,
                          gpu::KernelPath::kTuned, lse);
#else
  no_kernel(op, q.device);
#endif
}

void group_norm_backward(const Tensor& grad_out, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                         int groups, float eps, bool fuse_silu, const Tensor& grad_x, const Tensor& grad_gamma,
                         const Tensor& grad_beta) {
  constexpr std::string_view op = "group_norm_backward";
  const OpScope scope("group_norm_backward", x.device);
  check_operands(op, x.device, x.dtype,
                 {{"input", &x}, {"gamma", &gamma}, {"beta", &beta}, {"output gradient", &grad_out},
                  {"input gradient", &grad_x}, {"gamma gradient", &grad_gamma}, {"beta gradient", &grad_beta}});
  HD_CHECK(x.rank() >= 2, op, ": input has shape ", x.shape.to_string(), ", expected rank >= 2");
  HD_CHECK(groups >= 1 && x.dim(-1) % groups == 0, op, ": ", x.dim(-1), " channels of ", x.shape.to_string(),
           " do not split into ", groups, " groups");
  for (const auto& [what, t] : Operands{{"gamma", &gamma}, {"beta", &beta}, {"gamma gradient", &grad_gamma},
                                        {"beta gradient", &grad_beta}})
    check_shape(op, what, *t, Shape{x.dim(-1)});
  check_shape(op, "output gradient", grad_out, x.shape);
  check_shape(op, "input gradient", grad_x, x.shape);
  HD_CHECK(std::isfinite(eps) && eps > 0.0f, op, ": eps ", eps, " must be positive");
  if (x.device.is_cpu()) return cpu::group_norm_backward(grad_out, x, gamma, beta, groups, eps, fuse_silu, grad_x, grad_gamma, grad_beta);
#if defined(HD_WITH_GPU)
  gpu::group_norm_backward(grad_out, x, gamma, beta, groups, eps, fuse_silu, grad_x, grad_gamma, grad_beta);
#else
  no_kernel(op, x.device);
#endif
}

void layer_norm_backward(const Tensor& grad_out, const Tensor& x, const Tensor& gamma, float eps,
                         const Tensor& grad_x, const Tensor& grad_gamma, const Tensor& grad_beta) {
  constexpr std::string_view op = "layer_norm_backward";
  const OpScope scope("layer_norm_backward", x.device);
  check_operands(op, x.device, x.dtype,
                 {{"input", &x}, {"gamma", &gamma}, {"output gradient", &grad_out}, {"input gradient", &grad_x},
                  {"gamma gradient", &grad_gamma}, {"beta gradient", &grad_beta}});
  HD_CHECK(x.rank() >= 1, op, ": input has no dimensions");
  for (const auto& [what, t] :
       Operands{{"gamma", &gamma}, {"gamma gradient", &grad_gamma}, {"beta gradient", &grad_beta}})
    check_shape(op, what, *t, Shape{x.dim(-1)});
  check_shape(op, "output gradient", grad_out, x.shape);
  check_shape(op, "input gradient", grad_x, x.shape);
  HD_CHECK(std::isfinite(eps) && eps > 0.0f, op, ": eps ", eps, " must be positive");
  if (x.device.is_cpu()) return cpu::layer_norm_backward(grad_out, x, gamma, eps, grad_x, grad_gamma, grad_beta);
#if defined(HD_WITH_GPU)
  gpu::layer_norm_backward(grad_out, x, gamma, eps, grad_x, grad_gamma, grad_beta);
#else
  no_kernel(op, x.device);
#endif
}

void geglu_backward(const Tensor& grad_out, const Tensor& x, GeluApproximation approximation,
                    const Tensor& grad_x) {
  constexpr std::string_view op = "geglu_backward";
  const OpScope scope("geglu_backward", x.device);
  check_operands(op, x.device, x.dtype, {{"input", &x}, {"output gradient", &grad_out}, {"input gradient", &grad_x}});
  HD_CHECK(x.rank() >= 1 && x.dim(-1) % 2 == 0, op, ": input ", x.shape.to_string(),
           " must end in an even dimension (value and gate halves)");
  Shape half = x.shape;
  half[half.rank() - 1] = x.dim(-1) / 2;
  check_shape(op, "output gradient", grad_out, half);
  check_shape(op, "input gradient", grad_x, x.shape);
  if (x.device.is_cpu()) return cpu::geglu_backward(grad_out, x, approximation, grad_x);
#if defined(HD_WITH_GPU)
  gpu::geglu_backward(grad_out, x, approximation, grad_x);
#else
  no_kernel(op, x.device);
#endif
}

}  // namespace hd::ops
