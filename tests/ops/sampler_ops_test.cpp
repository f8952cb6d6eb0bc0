// ops::sampler_input and ops::sampler_step on the CPU: the denoising loop's one-op step (guidance +
// update) gives what guidance followed by Sampler::step gives (the path that reproduces diffusers'
// trajectories, tests/sampling), for every sampler kind; and bad arguments are clear errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "core/error.h"
#include "ops/ops.h"
#include "sampling/sampler.h"
#include "test_util.h"

namespace hd {
namespace {

struct Case {
  SamplerKind kind;
  SigmaSchedule schedule;
  Prediction prediction;
};

TEST(SamplerOps, OneStepOpFollowsTheSamplersTrajectoryWithGuidance) {
  test::Rng rng;
  HD_SEED_TRACE(rng);
  const Shape shape{2, 5, 3, 4};
  const int steps = 6;
  const float cfg = 7.5f;
  for (const Case c : {Case{SamplerKind::kEuler, SigmaSchedule::kKarras, Prediction::kEpsilon},
                       Case{SamplerKind::kEulerAncestral, SigmaSchedule::kDiscrete, Prediction::kVPrediction},
                       Case{SamplerKind::kDdim, SigmaSchedule::kDiscrete, Prediction::kEpsilon},
                       Case{SamplerKind::kDdim, SigmaSchedule::kDiscrete, Prediction::kVPrediction},
                       Case{SamplerKind::kDpmpp2m, SigmaSchedule::kKarras, Prediction::kEpsilon},
                       Case{SamplerKind::kDpmpp2m, SigmaSchedule::kDiscrete, Prediction::kVPrediction}}) {
    SCOPED_TRACE(std::string(sampler_name(c.kind)));
    SchedulerConfig config;
    config.prediction = c.prediction;
    auto reference = Sampler::create(c.kind, c.schedule, config, steps);
    auto under_test = Sampler::create(c.kind, c.schedule, config, steps);
    const OwnedTensor start = test::random_tensor(rng, shape, reference->init_noise_sigma());
    std::vector<float> expected = test::to_vector(start);
    const OwnedTensor sample = OwnedTensor::copy_of(start);
    OwnedTensor x0(shape, DType::kF32), previous_x0(shape, DType::kF32);
    const int64_t count = start.view().numel();
    for (int i = 0; i < steps; ++i) {
      // The model's input: divided as scale_model_input does, the same values in both halves.
      OwnedTensor input(Shape{4, 5, 3, 4}, DType::kF32);
      ops::sampler_input(sample, under_test->input_divisor(i), input);
      std::vector<float> scaled(size_t(count), 0.0f);
      reference->scale_model_input(i, expected.data(), scaled.data(), count);
      for (int64_t j = 0; j < 2 * count; ++j) ASSERT_EQ(input.ptr<float>()[j], scaled[size_t(j % count)]) << j;

      const OwnedTensor prediction = test::random_tensor(rng, Shape{4, 5, 3, 4});  // [uncond; cond]
      const OwnedTensor noise = test::random_tensor(rng, shape);
      const float* pred = prediction.ptr<float>();
      std::vector<float> guided(static_cast<size_t>(count));
      for (int64_t j = 0; j < count; ++j) guided[size_t(j)] = pred[j] + cfg * (pred[count + j] - pred[j]);
      reference->step(i, guided.data(), expected.data(), count, [&](float* out, int64_t n) {
        ASSERT_EQ(n, count);
        std::copy_n(noise.ptr<float>(), n, out);
      });

      ops::SamplerUpdate u = under_test->update(i);
      u.guidance_scale = cfg;
      if (u.writes_x0()) std::swap(x0, previous_x0);
      const Tensor noise_view = noise.view(), previous_view = previous_x0.view(), x0_view = x0.view();
      ops::sampler_step(u, prediction, sample, &noise_view, &previous_view, &x0_view);
      const std::vector<float> got = test::to_vector(sample);
      for (int64_t j = 0; j < count; ++j) ASSERT_EQ(got[size_t(j)], expected[size_t(j)]) << "step " << i << ", value " << j;
    }
  }
}

TEST(SamplerOps, UnguidedStepUsesTheOneOutputAsIs) {
  test::Rng rng;
  HD_SEED_TRACE(rng);
  SchedulerConfig config;
  auto reference = Sampler::create(SamplerKind::kEuler, SigmaSchedule::kDiscrete, config, 4);
  auto under_test = Sampler::create(SamplerKind::kEuler, SigmaSchedule::kDiscrete, config, 4);
  const OwnedTensor sample = test::random_tensor(rng, Shape{1, 4, 4, 4});
  std::vector<float> expected = test::to_vector(sample);
  const OwnedTensor prediction = test::random_tensor(rng, Shape{1, 4, 4, 4});
  reference->step(0, prediction.ptr<float>(), expected.data(), 64, nullptr);
  ops::sampler_step(under_test->update(0), prediction, sample, nullptr, nullptr, nullptr);
  EXPECT_EQ(test::to_vector(sample), expected);
}

TEST(SamplerOps, BadArgumentsAreClearErrors) {
  const OwnedTensor sample(Shape{1, 4, 4, 4}, DType::kF32);
  ops::SamplerUpdate u;
  u.guidance_scale = 5.0f;
  const auto message = [](const std::function<void()>& f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  // Guided: the prediction needs both halves.
  EXPECT_NE(message([&] { ops::sampler_step(u, OwnedTensor(Shape{1, 4, 4, 4}, DType::kF32), sample, nullptr, nullptr, nullptr); })
                .find("prediction has shape [1, 4, 4, 4], expected [2, 4, 4, 4]"),
            std::string::npos);
  u.ancestral = true;
  EXPECT_NE(message([&] { ops::sampler_step(u, OwnedTensor(Shape{2, 4, 4, 4}, DType::kF32), sample, nullptr, nullptr, nullptr); })
                .find("needs noise"),
            std::string::npos);
  u = ops::SamplerUpdate{};
  u.form = ops::UpdateForm::kDpmSecondOrder;
  const OwnedTensor wrong(Shape{1, 4, 4, 3}, DType::kF32);
  EXPECT_NE(message([&] { ops::sampler_step(u, OwnedTensor(Shape{1, 4, 4, 4}, DType::kF32), sample, nullptr, &wrong.view(), &wrong.view()); })
                .find("previous x0 has shape [1, 4, 4, 3]"),
            std::string::npos);
  EXPECT_NE(message([&] { ops::sampler_input(sample, 1.0f, OwnedTensor(Shape{3, 4, 4, 5}, DType::kF32)); })
                .find("sampler_input: output has shape [3, 4, 4, 5]"),
            std::string::npos);
  EXPECT_NE(message([&] { ops::sampler_input(sample, 0.0f, OwnedTensor(Shape{2, 4, 4, 4}, DType::kF32)); }).find("divisor is zero"),
            std::string::npos);
}

}  // namespace
}  // namespace hd
