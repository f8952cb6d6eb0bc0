// Every sampler, schedule, spacing and prediction type against the trajectories diffusers recorded
// (tests/fixtures/sampling/schedulers.safetensors): same timesteps, same initial noise, same model
// outputs, and so the same samples after every step.
#include "sampling/sampler.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "fixture_util.h"
#include "sampling/torch_rng.h"

namespace hd {
namespace {

double rel_l2(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(b[i]) * b[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

TEST(Samplers, ReproduceDiffusersTrajectories) {
  const test::Fixture fixture("sampling/schedulers.safetensors");
  const auto& cases = fixture.cases()["cases"];
  ASSERT_EQ(cases.size(), 36u);
  double worst = 0.0;
  for (const auto& c : cases) {
    const std::string name = c["name"];
    SCOPED_TRACE(name);
    SchedulerConfig config;
    config.spacing = parse_timestep_spacing(c["spacing"].get<std::string>());
    config.prediction = parse_prediction(c["prediction"].get<std::string>());
    const int steps = c["steps"];
    auto sampler = Sampler::create(parse_sampler(c["sampler"].get<std::string>()),
                                   parse_sigma_schedule(c["schedule"].get<std::string>()), config, steps);

    const std::vector<float> expected_t = fixture.floats(name + ".timesteps");
    ASSERT_EQ(sampler->steps(), int(expected_t.size()));
    for (int i = 0; i < steps; ++i) EXPECT_NEAR(sampler->timestep(i), expected_t[size_t(i)], 1e-3) << "timestep " << i;
    EXPECT_NEAR(sampler->init_noise_sigma(), c["init_noise_sigma"].get<double>(), 1e-5 * c["init_noise_sigma"].get<double>());

    // The initial noise comes from the same generator that the ancestral steps draw from afterwards.
    TorchCpuGenerator generator(c["seed"].get<uint64_t>());
    std::vector<float> sample = fixture.floats(name + ".sample0");
    const auto count = int64_t(sample.size());
    std::vector<float> noise(sample.size());
    generator.randn(noise.data(), count);
    for (float& v : noise) v *= sampler->init_noise_sigma();
    EXPECT_LT(rel_l2(noise, sample), 1e-6) << "initial noise";
    const NoiseSource draw = [&](float* out, int64_t n) { generator.randn(out, n); };

    for (int i = 0; i < steps; ++i) {
      std::vector<float> scaled(sample.size());
      sampler->scale_model_input(i, sample.data(), scaled.data(), count);
      EXPECT_LT(rel_l2(scaled, fixture.floats(name + ".scaled" + std::to_string(i))), 1e-5) << "scaled input " << i;
      const std::vector<float> model_output = fixture.floats(name + ".model_output" + std::to_string(i));
      sampler->step(i, model_output.data(), sample.data(), count, draw);
      const double err = rel_l2(sample, fixture.floats(name + ".sample" + std::to_string(i + 1)));
      worst = std::max(worst, err);
      EXPECT_LT(err, 1e-5) << "sample after step " << i;
    }
  }
  std::printf("worst relative L2 error over all steps: %.3g\n", worst);
}

TEST(Samplers, RejectWhatDiffusersDoesNotOffer) {
  SchedulerConfig config;
  EXPECT_THROW(Sampler::create(SamplerKind::kDdim, SigmaSchedule::kKarras, config, 10), Error);
  EXPECT_THROW(Sampler::create(SamplerKind::kEulerAncestral, SigmaSchedule::kKarras, config, 10), Error);
  EXPECT_THROW(Sampler::create(SamplerKind::kEuler, SigmaSchedule::kDiscrete, config, 0), Error);
  EXPECT_THROW(Sampler::create(SamplerKind::kEuler, SigmaSchedule::kDiscrete, config, 1001), Error);
  EXPECT_THROW(parse_sampler("heun"), Error);
  EXPECT_THROW(parse_sigma_schedule("exponential"), Error);
  EXPECT_THROW(parse_timestep_spacing("uniform"), Error);
}

}  // namespace
}  // namespace hd

namespace hd {
namespace {

TEST(SchedulerConfig, ReadsDiffusersJsonAndFillsSdDefaults) {
  const SchedulerConfig c = scheduler_config_from_json(
      R"({"_class_name": "PNDMScheduler", "beta_start": 0.001, "beta_end": 0.02, "beta_schedule": "scaled_linear",
          "num_train_timesteps": 1000, "steps_offset": 1, "set_alpha_to_one": false, "prediction_type": "v_prediction"})");
  EXPECT_FLOAT_EQ(c.beta_start, 0.001f);
  EXPECT_FLOAT_EQ(c.beta_end, 0.02f);
  EXPECT_EQ(c.spacing, TimestepSpacing::kLeading);  // absent: SD's own spacing
  EXPECT_EQ(c.prediction, Prediction::kVPrediction);
  EXPECT_EQ(scheduler_config_from_json(R"({"timestep_spacing": "trailing"})").spacing, TimestepSpacing::kTrailing);
  EXPECT_THROW(scheduler_config_from_json("[1, 2]"), Error);
  EXPECT_THROW(scheduler_config_from_json(R"({"beta_schedule": "squaredcos_cap_v2"})"), Error);
  EXPECT_THROW(scheduler_config_from_json(R"({"trained_betas": [0.1, 0.2]})"), Error);
  EXPECT_THROW(scheduler_config_from_json(R"({"prediction_type": "sample"})"), Error);
  EXPECT_THROW(scheduler_config_from_json(R"({"beta_start": "small"})"), Error);
}

}  // namespace
}  // namespace hd
