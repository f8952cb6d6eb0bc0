// The sampler ops on the GPU against the CPU op (the same formula, ops/sampler_update.h) on fresh random
// latents, for every update form a sampler produces, guided and unguided, with the model's output in
// f32, f16 and bf16.
#include <gtest/gtest.h>

#include <string>

#include "ops/gpu/gpu_test_util.h"
#include "ops/ops.h"
#include "sampling/sampler.h"
#include "test_util.h"

namespace hd {
namespace {

// A few real steps of each sampler kind (first-order and second-order DPM steps included).
std::vector<ops::SamplerUpdate> updates_of_every_form() {
  std::vector<ops::SamplerUpdate> all;
  for (const Prediction prediction : {Prediction::kEpsilon, Prediction::kVPrediction}) {
    SchedulerConfig config;
    config.prediction = prediction;
    for (const SamplerKind kind : {SamplerKind::kEuler, SamplerKind::kEulerAncestral, SamplerKind::kDdim, SamplerKind::kDpmpp2m}) {
      auto sampler = Sampler::create(kind, SigmaSchedule::kDiscrete, config, 5);
      for (int i = 0; i < 3; ++i) all.push_back(sampler->update(i));
    }
  }
  return all;
}

TEST(GpuSamplerOps, StepMatchesCpuForEveryFormGuidedOrNot) {
  test::Rng rng;
  HD_SEED_TRACE(rng);
  const Shape shape{2, 9, 7, 4};
  for (ops::SamplerUpdate u : updates_of_every_form()) {
    for (const float cfg : {1.0f, 7.5f}) {
      u.guidance_scale = cfg;
      const Shape prediction_shape{u.guided() ? 4 : 2, 9, 7, 4};
      for (DType t : {DType::kF32, DType::kF16, DType::kBF16}) {
        SCOPED_TRACE(::testing::Message() << "form " << int(u.form) << " v " << u.v_prediction << " cfg " << cfg
                                          << " " << dtype_name(t));
        const OwnedTensor sample = test::random_tensor(rng, shape, 3.0f);
        const OwnedTensor prediction = test::random_tensor(rng, prediction_shape);
        const OwnedTensor noise = test::random_tensor(rng, shape), previous_x0 = test::random_tensor(rng, shape);
        // CPU: the prediction as the GPU sees it (rounded to t).
        const OwnedTensor expected = OwnedTensor::copy_of(sample);
        OwnedTensor expected_x0(shape, DType::kF32);
        const Tensor noise_view = noise.view(), previous_view = previous_x0.view(), x0_view = expected_x0.view();
        ops::sampler_step(u, test::rounded_to(prediction, t), expected, &noise_view, &previous_view, &x0_view);

        const OwnedTensor dsample = test::to_gpu(sample, DType::kF32), dnoise = test::to_gpu(noise, DType::kF32);
        const OwnedTensor dprevious = test::to_gpu(previous_x0, DType::kF32);
        const OwnedTensor dx0 = test::poisoned_gpu(shape, DType::kF32);
        const Tensor dnoise_view = dnoise.view(), dprevious_view = dprevious.view(), dx0_view = dx0.view();
        ops::sampler_step(u, test::to_gpu(prediction, t), dsample, &dnoise_view, &dprevious_view, &dx0_view);
        // f32 arithmetic on both sides; the GPU compiler may fuse a multiply and an add, a rounding apart.
        EXPECT_LE(test::relative_l2(test::to_host_f32(dsample), test::reference_of(expected)), 1e-6);
        if (u.writes_x0()) {
          EXPECT_LE(test::relative_l2(test::to_host_f32(dx0), test::reference_of(expected_x0)), 1e-6);
        }
      }
    }
  }
}

TEST(GpuSamplerOps, InputIsScaledConvertedAndRepeated) {
  test::Rng rng;
  HD_SEED_TRACE(rng);
  const OwnedTensor sample = test::random_tensor(rng, Shape{2, 5, 6, 4}, 10.0f);
  OwnedTensor expected(Shape{4, 5, 6, 4}, DType::kF32);
  ops::sampler_input(sample, 3.7f, expected);
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16}) {
    const OwnedTensor out = test::poisoned_gpu(Shape{4, 5, 6, 4}, t);
    ops::sampler_input(test::to_gpu(sample, DType::kF32), 3.7f, out);
    // The GPU rounds the quotient once to t; the reference is the f32 quotient rounded the same way.
    EXPECT_EQ(test::relative_l2(test::to_host_f32(out), test::reference_of(test::rounded_to(expected, t))), 0.0)
        << dtype_name(t);
  }
}

}  // namespace
}  // namespace hd
