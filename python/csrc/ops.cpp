// The engine's ops as PyTorch operators, torch.ops.hipdiffusion.*: schemas (TORCH_LIBRARY) and one
// implementation per op, registered for the CPU (the engine's reference kernels) and, in GPU builds, for
// the CUDA dispatch key (ROCm builds of PyTorch dispatch their GPU tensors there too).
//
// Tensors are in the engine's layout: channels last ([N, H, W, C] images, [N, L, C] tokens), convolution
// weights [Cout, kh, kw, Cin]. python/hipdiffusion/ops.py adapts PyTorch's NCHW modules to it, and
// holds the fake (shape) functions, the autograd formulas and the fallbacks.
#include <torch/library.h>

#include <string>
#include <tuple>

#include "ops/ops.h"
#include "torch_bridge.h"

namespace hd::torch_ext {

namespace {

using TensorTriple = std::tuple<at::Tensor, at::Tensor, at::Tensor>;

ops::GeluApproximation approximation_of(const std::string& name) {
  TORCH_CHECK_VALUE(name == "none" || name == "tanh", "hipdiffusion::geglu: approximate must be 'none' or 'tanh', got '",
                    name, "'");
  return name == "tanh" ? ops::GeluApproximation::kTanh : ops::GeluApproximation::kNone;
}

ops::AttentionParams attention_params(int64_t heads, bool causal, double scale) {
  TORCH_CHECK_VALUE(heads >= 1 && heads <= (1 << 20), "hipdiffusion::attention: heads must be positive, got ", heads);
  return {int(heads), causal, float(scale)};
}

at::Tensor attention(const at::Tensor& q_in, const at::Tensor& k_in, const at::Tensor& v_in, int64_t heads, bool causal,
                     double scale) {
  const at::Tensor q = q_in.contiguous(), k = k_in.contiguous(), v = v_in.contiguous();
  at::Tensor out = at::empty_like(q);
  const DeviceScope scope(q);
  run_translating_errors("attention", [&] {
    ops::attention(view_of(q), view_of(k), view_of(v), attention_params(heads, causal, scale), view_of(out));
  });
  return out;
}

// The output and each row's log-sum-exp [B, heads, Lq] f32, which attention_backward takes instead of
// recomputing it: what the autograd formula saves when a gradient will be asked for.
std::tuple<at::Tensor, at::Tensor> attention_with_lse(const at::Tensor& q_in, const at::Tensor& k_in,
                                                      const at::Tensor& v_in, int64_t heads, bool causal,
                                                      double scale) {
  const at::Tensor q = q_in.contiguous(), k = k_in.contiguous(), v = v_in.contiguous();
  TORCH_CHECK_VALUE(q.dim() == 3, "hipdiffusion::attention_with_lse: q must be [B, L, heads*D], got ",
                    q.sizes());
  const ops::AttentionParams p = attention_params(heads, causal, scale);
  at::Tensor out = at::empty_like(q),
             lse = at::empty({q.size(0), heads, q.size(1)}, q.options().dtype(at::kFloat));
  const DeviceScope scope(q);
  run_translating_errors("attention_with_lse", [&] {
    const Tensor lse_view = view_of(lse);
    ops::attention(view_of(q), view_of(k), view_of(v), p, view_of(out), &lse_view);
  });
  return {out, lse};
}

TensorTriple attention_backward(const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k,
                                const at::Tensor& v, const at::Tensor& out, int64_t heads, bool causal,
                                double scale, const c10::optional<at::Tensor>& lse) {
  const at::Tensor go = grad_out.contiguous(), qc = q.contiguous(), kc = k.contiguous(), vc = v.contiguous(),
                   oc = out.contiguous();
  const c10::optional<at::Tensor> lse_c =
      lse.has_value() ? c10::optional<at::Tensor>(lse->contiguous()) : lse;
  at::Tensor dq = at::empty_like(qc), dk = at::empty_like(kc), dv = at::empty_like(vc);
  const DeviceScope scope(qc);
  run_translating_errors("attention_backward", [&] {
    Tensor lse_view;
    ops::attention_backward(view_of(go), view_of(qc), view_of(kc), view_of(vc), view_of(oc),
                            attention_params(heads, causal, scale), view_of(dq), view_of(dk), view_of(dv),
                            optional_view(lse_c, lse_view));
  });
  return {dq, dk, dv};
}

at::Tensor group_norm(const at::Tensor& x_in, const at::Tensor& weight, const at::Tensor& bias, int64_t groups,
                      double eps, bool silu) {
  const at::Tensor x = x_in.contiguous(), w = weight.contiguous(), b = bias.contiguous();
  at::Tensor out = at::empty_like(x);
  const DeviceScope scope(x);
  run_translating_errors("group_norm", [&] {
    ops::group_norm(view_of(x), view_of(w), view_of(b), int(groups), float(eps), silu, view_of(out));
  });
  return out;
}

TensorTriple group_norm_backward(const at::Tensor& grad_out, const at::Tensor& x_in, const at::Tensor& weight,
                                 const at::Tensor& bias, int64_t groups, double eps, bool silu) {
  const at::Tensor go = grad_out.contiguous(), x = x_in.contiguous(), w = weight.contiguous(), b = bias.contiguous();
  at::Tensor dx = at::empty_like(x), dw = at::empty_like(w), db = at::empty_like(b);
  const DeviceScope scope(x);
  run_translating_errors("group_norm_backward", [&] {
    ops::group_norm_backward(view_of(go), view_of(x), view_of(w), view_of(b), int(groups), float(eps), silu,
                             view_of(dx), view_of(dw), view_of(db));
  });
  return {dx, dw, db};
}

at::Tensor layer_norm(const at::Tensor& x_in, const at::Tensor& weight, const at::Tensor& bias, double eps) {
  const at::Tensor x = x_in.contiguous(), w = weight.contiguous(), b = bias.contiguous();
  at::Tensor out = at::empty_like(x);
  const DeviceScope scope(x);
  run_translating_errors("layer_norm",
                         [&] { ops::layer_norm(view_of(x), view_of(w), view_of(b), float(eps), view_of(out)); });
  return out;
}

TensorTriple layer_norm_backward(const at::Tensor& grad_out, const at::Tensor& x_in, const at::Tensor& weight,
                                 double eps) {
  const at::Tensor go = grad_out.contiguous(), x = x_in.contiguous(), w = weight.contiguous();
  at::Tensor dx = at::empty_like(x), dw = at::empty_like(w), db = at::empty_like(w);
  const DeviceScope scope(x);
  run_translating_errors("layer_norm_backward", [&] {
    ops::layer_norm_backward(view_of(go), view_of(x), view_of(w), float(eps), view_of(dx), view_of(dw), view_of(db));
  });
  return {dx, dw, db};
}

std::vector<int64_t> halved_last(const at::Tensor& x, const char* op) {
  TORCH_CHECK_VALUE(x.dim() >= 1 && x.size(-1) % 2 == 0, "hipdiffusion::", op, ": input ", x.sizes(),
                    " must end in an even dimension (value and gate halves)");
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
  shape.back() /= 2;
  return shape;
}

at::Tensor geglu(const at::Tensor& x_in, const std::string& approximate) {
  const at::Tensor x = x_in.contiguous();
  const ops::GeluApproximation a = approximation_of(approximate);
  at::Tensor out = at::empty(halved_last(x, "geglu"), x.options());
  const DeviceScope scope(x);
  run_translating_errors("geglu", [&] { ops::geglu(view_of(x), a, view_of(out)); });
  return out;
}

at::Tensor geglu_backward(const at::Tensor& grad_out, const at::Tensor& x_in, const std::string& approximate) {
  const at::Tensor go = grad_out.contiguous(), x = x_in.contiguous();
  const ops::GeluApproximation a = approximation_of(approximate);
  at::Tensor dx = at::empty_like(x);
  const DeviceScope scope(x);
  run_translating_errors("geglu_backward", [&] { ops::geglu_backward(view_of(go), view_of(x), a, view_of(dx)); });
  return dx;
}

at::Tensor linear(const at::Tensor& x_in, const at::Tensor& weight, const c10::optional<at::Tensor>& bias,
                  const c10::optional<at::Tensor>& residual) {
  const at::Tensor x = x_in.contiguous(), w = weight.contiguous();
  TORCH_CHECK_VALUE(x.dim() >= 1 && w.dim() == 2, "hipdiffusion::linear: input ", x.sizes(), " and weight ",
                    w.sizes(), " do not form a product (weight must be [out, in])");
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
  shape.back() = w.size(0);
  // The residual is added in the product's epilogue by writing the output over a copy of it.
  at::Tensor out = residual.has_value() ? residual->to(x.options(), /*non_blocking=*/false, /*copy=*/true)
                                            .contiguous()
                                      : at::empty(shape, x.options());
  const c10::optional<at::Tensor> b = bias.has_value() ? c10::optional<at::Tensor>(bias->contiguous()) : bias;
  const DeviceScope scope(x);
  run_translating_errors("linear", [&] {
    Tensor bias_view;
    const Tensor out_view = view_of(out);
    ops::linear(view_of(x), view_of(w), optional_view(b, bias_view), residual.has_value() ? &out_view : nullptr,
                out_view);
  });
  return out;
}

at::Tensor conv2d(const at::Tensor& x_in, const at::Tensor& weight, const c10::optional<at::Tensor>& bias,
                  const c10::optional<at::Tensor>& residual, int64_t stride, int64_t padding) {
  const at::Tensor x = x_in.contiguous(), w = weight.contiguous();
  TORCH_CHECK_VALUE(stride >= 1 && stride <= 64 && padding >= 0 && padding <= 64,
                    "hipdiffusion::conv2d: stride ", stride, " or padding ", padding, " out of range");
  const ops::Conv2dParams p{int(stride), int(padding), 0};
  at::Tensor out;
  const c10::optional<at::Tensor> b = bias.has_value() ? c10::optional<at::Tensor>(bias->contiguous()) : bias;
  run_translating_errors("conv2d", [&] {
    TORCH_CHECK_VALUE(x.dim() == 4 && w.dim() == 4, "hipdiffusion::conv2d: input ", x.sizes(), " and weight ",
                      w.sizes(), " must be [N, H, W, Cin] and [Cout, kh, kw, Cin]");
    const Shape shape = ops::conv2d_output_shape(view_of(x).shape, view_of(w).shape, p);
    out = residual.has_value() ? residual->to(x.options(), false, true).contiguous()
                               : at::empty({shape[0], shape[1], shape[2], shape[3]}, x.options());
    const DeviceScope scope(x);
    Tensor bias_view;
    const Tensor out_view = view_of(out);
    ops::conv2d(view_of(x), view_of(w), optional_view(b, bias_view), residual.has_value() ? &out_view : nullptr, p,
                out_view);
  });
  return out;
}

}  // namespace

}  // namespace hd::torch_ext

TORCH_LIBRARY(hipdiffusion, m) {
  m.def("attention(Tensor q, Tensor k, Tensor v, int heads, bool causal=False, float scale=0.0) -> Tensor");
  m.def(
      "attention_with_lse(Tensor q, Tensor k, Tensor v, int heads, bool causal=False, float scale=0.0) "
      "-> (Tensor, Tensor)");
  m.def(
      "attention_backward(Tensor grad_out, Tensor q, Tensor k, Tensor v, Tensor out, int heads, bool causal, "
      "float scale, Tensor? lse=None) -> (Tensor, Tensor, Tensor)");
  m.def("group_norm(Tensor x, Tensor weight, Tensor bias, int groups, float eps, bool silu=False) -> Tensor");
  m.def("group_norm_backward(Tensor grad_out, Tensor x, Tensor weight, Tensor bias, int groups, float eps, "
        "bool silu) -> (Tensor, Tensor, Tensor)");
  m.def("layer_norm(Tensor x, Tensor weight, Tensor bias, float eps) -> Tensor");
  m.def("layer_norm_backward(Tensor grad_out, Tensor x, Tensor weight, float eps) -> (Tensor, Tensor, Tensor)");
  m.def("geglu(Tensor x, str approximate='none') -> Tensor");
  m.def("geglu_backward(Tensor grad_out, Tensor x, str approximate='none') -> Tensor");
  m.def("linear(Tensor x, Tensor weight, Tensor? bias=None, Tensor? residual=None) -> Tensor");
  m.def("conv2d(Tensor x, Tensor weight, Tensor? bias=None, Tensor? residual=None, int stride=1, int padding=0) "
        "-> Tensor");
}

#define HD_REGISTER_OPS(m)                                            \
  m.impl("attention", &hd::torch_ext::attention);                     \
  m.impl("attention_with_lse", &hd::torch_ext::attention_with_lse);   \
  m.impl("attention_backward", &hd::torch_ext::attention_backward);   \
  m.impl("group_norm", &hd::torch_ext::group_norm);                   \
  m.impl("group_norm_backward", &hd::torch_ext::group_norm_backward); \
  m.impl("layer_norm", &hd::torch_ext::layer_norm);                   \
  m.impl("layer_norm_backward", &hd::torch_ext::layer_norm_backward); \
  m.impl("geglu", &hd::torch_ext::geglu);                             \
  m.impl("geglu_backward", &hd::torch_ext::geglu_backward);           \
  m.impl("linear", &hd::torch_ext::linear);                           \
  m.impl("conv2d", &hd::torch_ext::conv2d)

TORCH_LIBRARY_IMPL(hipdiffusion, CPU, m) { HD_REGISTER_OPS(m); }
#if defined(HD_WITH_GPU)
TORCH_LIBRARY_IMPL(hipdiffusion, CUDA, m) { HD_REGISTER_OPS(m); }
#endif
