// Front half of the sampler ops: checks, then the CPU loop or the GPU kernel (one formula for both:
// ops/sampler_update.h).
#include <string>

#include "ops/op_checks.h"
#include "ops/ops.h"
#include "ops/profiler.h"
#if defined(HD_WITH_GPU)
#include "ops/gpu/gpu_ops.h"
#endif

namespace hd::ops {

namespace {

// sample must be an f32 [N, ...]; returns N.
int64_t check_sample(std::string_view op, const Tensor& sample) {
  check_operand(op, "sample", sample, sample.device);
  HD_CHECK(sample.rank() >= 1, op, ": sample has shape ", sample.shape.to_string(), ", expected [N, ...]");
  HD_CHECK_KIND(sample.dtype == DType::kF32, ErrorKind::kUnsupported, op, ": sample is ", dtype_name(sample.dtype),
                ", expected f32 (the latents are kept in f32)");
  return sample.dim(0);
}

Shape with_batch(const Shape& s, int64_t batch) {
  Shape out = s;
  out[0] = batch;
  return out;
}

void check_f32_like(std::string_view op, std::string_view what, const Tensor* t, const Tensor& sample) {
  HD_CHECK(t != nullptr, op, ": this step needs ", what, ", but none was given");
  check_operand(op, what, *t, sample.device);
  check_shape(op, what, *t, sample.shape);
  HD_CHECK_KIND(t->dtype == DType::kF32, ErrorKind::kUnsupported, op, ": ", what, " is ", dtype_name(t->dtype),
                ", expected f32");
}

}  // namespace

void sampler_input(const Tensor& sample, float divisor, const Tensor& out) {
  const OpScope scope("sampler_input", sample.device);
  const int64_t n = check_sample("sampler_input", sample);
  check_operand("sampler_input", "output", out, sample.device);
  HD_CHECK(n > 0 && out.rank() == sample.rank() && out.dim(0) % n == 0 &&
               out.shape == with_batch(sample.shape, out.dim(0)),
           "sampler_input: output has shape ", out.shape.to_string(), ", expected ", sample.shape.to_string(),
           " with the first dimension a multiple of ", n);
  HD_CHECK(divisor != 0.0f, "sampler_input: the divisor is zero");
  if (sample.device.is_cpu()) {
    const float* s = sample.ptr<float>();
    float* o = out.ptr<float>();
    const int64_t count = sample.numel();
    for (int64_t copy = 0; copy < out.dim(0) / n; ++copy)
      for (int64_t j = 0; j < count; ++j) o[copy * count + j] = s[j] / divisor;
    return;
  }
#if defined(HD_WITH_GPU)
  gpu::sampler_input(sample, divisor, out);
#else
  no_kernel("sampler_input", sample.device);
#endif
}

void sampler_step(const SamplerUpdate& u, const Tensor& prediction, const Tensor& sample, const Tensor* noise,
                  const Tensor* previous_x0, const Tensor* x0) {
  const OpScope scope("sampler_step", sample.device);
  const int64_t n = check_sample("sampler_step", sample);
  check_operand("sampler_step", "prediction", prediction, sample.device);
  check_shape("sampler_step", "prediction", prediction, with_batch(sample.shape, u.guided() ? 2 * n : n));
  if (u.adds_noise()) check_f32_like("sampler_step", "noise", noise, sample);
  if (u.reads_previous_x0()) check_f32_like("sampler_step", "previous x0", previous_x0, sample);
  if (u.writes_x0()) check_f32_like("sampler_step", "x0", x0, sample);
  if (sample.device.is_cpu()) {
    const int64_t count = sample.numel();
    const float* pred = prediction.ptr<float>();
    float* s = sample.ptr<float>();
    for (int64_t j = 0; j < count; ++j) {
      const float output = guided_output(u, pred[j], u.guided() ? pred[count + j] : 0.0f);
      s[j] = updated_sample(u, s[j], output, u.adds_noise() ? noise->ptr<float>()[j] : 0.0f,
                            u.reads_previous_x0() ? previous_x0->ptr<float>()[j] : 0.0f,
                            u.writes_x0() ? x0->ptr<float>() + j : nullptr);
    }
    return;
  }
#if defined(HD_WITH_GPU)
  gpu::sampler_step(u, prediction, sample, u.adds_noise() ? noise : nullptr,
                    u.reads_previous_x0() ? previous_x0 : nullptr, u.writes_x0() ? x0 : nullptr);
#else
  no_kernel("sampler_step", sample.device);
#endif
}

}  // namespace hd::ops
