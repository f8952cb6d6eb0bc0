// The four samplers. Scalar coefficients are computed in float, in the order diffusers evaluates its
// 0-dim float32 tensors, so results agree with diffusers to float rounding, not just in formula.
#include "sampling/sampler.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace hd {

SamplerKind parse_sampler(std::string_view name) {
  if (name == "euler") return SamplerKind::kEuler;
  if (name == "euler_a") return SamplerKind::kEulerAncestral;
  if (name == "ddim") return SamplerKind::kDdim;
  if (name == "dpmpp_2m") return SamplerKind::kDpmpp2m;
  throw Error(ErrorKind::kInvalidInput,
              str_cat("unknown sampler '", name, "' (expected euler, euler_a, ddim or dpmpp_2m)"));
}

SigmaSchedule parse_sigma_schedule(std::string_view name) {
  if (name == "discrete") return SigmaSchedule::kDiscrete;
  if (name == "karras") return SigmaSchedule::kKarras;
  throw Error(ErrorKind::kInvalidInput, str_cat("unknown schedule '", name, "' (expected discrete or karras)"));
}

std::string_view sampler_name(SamplerKind kind) {
  switch (kind) {
    case SamplerKind::kEuler: return "euler";
    case SamplerKind::kEulerAncestral: return "euler_a";
    case SamplerKind::kDdim: return "ddim";
    case SamplerKind::kDpmpp2m: return "dpmpp_2m";
  }
  return "?";
}

void Sampler::scale_model_input(int i, const float* sample, float* out, int64_t count) const {
  const float divisor = input_divisor(i);
  for (int64_t j = 0; j < count; ++j) out[j] = sample[j] / divisor;
}

void Sampler::step(int i, const float* model_output, float* sample, int64_t count, const NoiseSource& noise) {
  const ops::SamplerUpdate u = update(i);
  if (u.adds_noise()) {
    noise_.resize(size_t(count));
    noise(noise_.data(), count);
  }
  if (u.writes_x0()) {
    previous_x0_.swap(x0_);
    x0_.resize(size_t(count));
  }
  for (int64_t j = 0; j < count; ++j) {
    sample[j] = ops::updated_sample(u, sample[j], model_output[j], u.adds_noise() ? noise_[size_t(j)] : 0.0f,
                                    u.reads_previous_x0() ? previous_x0_[size_t(j)] : 0.0f,
                                    u.writes_x0() ? &x0_[size_t(j)] : nullptr);
  }
}

namespace {

std::vector<float> to_float(const std::vector<double>& v) {
  std::vector<float> f(v.size());
  for (size_t i = 0; i < v.size(); ++i) f[i] = float(v[i]);
  return f;
}

std::vector<float> log_of(const std::vector<float>& v) {
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = std::log(v[i]);
  return out;
}

// ---- Euler and Euler ancestral: k-diffusion's sampler on sigmas interpolated at the timesteps ----
class EulerSampler : public Sampler {
 public:
  EulerSampler(const SchedulerConfig& config, int steps, bool ancestral, bool karras)
      : Sampler(config), ancestral_(ancestral) {
    const std::vector<float> table = training_sigmas(alphas_cumprod(config));
    const std::vector<double> t = euler_timesteps(config, steps);
    std::vector<double> sigmas;
    for (double ti : t) sigmas.push_back(interpolate_sigma(table, ti));
    if (karras) {
      sigmas = karras_sigmas(sigmas.back(), sigmas.front(), steps);
      const std::vector<float> log_table = log_of(table);
      std::vector<double> kt;
      for (double s : sigmas) kt.push_back(sigma_to_timestep(s, log_table));
      timesteps_ = to_float(kt);
    } else {
      timesteps_ = to_float(t);
    }
    sigmas.push_back(0.0);
    sigmas_ = to_float(sigmas);
    const float max_sigma = *std::max_element(sigmas_.begin(), sigmas_.end());
    init_noise_sigma_ = config.spacing == TimestepSpacing::kLeading ? std::sqrt(max_sigma * max_sigma + 1.0f) : max_sigma;
  }

  float input_divisor(int i) const override {
    const float sigma = sigmas_[size_t(i)];
    return std::sqrt(sigma * sigma + 1.0f);
  }

  void add_noise(int i, const float* original, const float* noise, float* out, int64_t count) const override {
    const float sigma = sigmas_[size_t(i)];
    for (int64_t j = 0; j < count; ++j) out[j] = original[j] + noise[j] * sigma;
  }

  ops::SamplerUpdate update(int i) override {
    ops::SamplerUpdate u;
    u.form = ops::UpdateForm::kEuler;
    u.v_prediction = config_.prediction == Prediction::kVPrediction;
    const float sigma = sigmas_[size_t(i)], sigma_next = sigmas_[size_t(i) + 1];
    u.sigma = sigma;
    if (!ancestral_) {
      u.dt = sigma_next - sigma;
      return u;
    }
    const float sigma_up =
        std::sqrt(sigma_next * sigma_next * (sigma * sigma - sigma_next * sigma_next) / (sigma * sigma));
    const float sigma_down = std::sqrt(sigma_next * sigma_next - sigma_up * sigma_up);
    u.dt = sigma_down - sigma;
    u.ancestral = true;
    u.noise_scale = sigma_up;
    return u;
  }

 private:
  bool ancestral_;
  std::vector<float> sigmas_;
};

// ---- DDIM (eta = 0): deterministic, on alphas_cumprod directly ----
class DdimSampler : public Sampler {
 public:
  DdimSampler(const SchedulerConfig& config, int steps) : Sampler(config), alphas_(alphas_cumprod(config)) {
    timesteps_ = to_float(ddim_timesteps(config, steps));
    stride_ = config.num_train_timesteps / steps;
  }

  void add_noise(int i, const float* original, const float* noise, float* out, int64_t count) const override {
    const float a = alphas_[size_t(timesteps_[size_t(i)])];
    const float sqrt_a = std::sqrt(a), sqrt_one_minus_a = std::sqrt(1.0f - a);
    for (int64_t j = 0; j < count; ++j) out[j] = sqrt_a * original[j] + sqrt_one_minus_a * noise[j];
  }

  ops::SamplerUpdate update(int i) override {
    const int t = int(timesteps_[size_t(i)]), prev = t - stride_;
    const float a_t = alphas_[size_t(t)];
    const float a_prev = prev >= 0 ? alphas_[size_t(prev)] : config_.set_alpha_to_one ? 1.0f : alphas_[0];
    const float beta_t = 1.0f - a_t;
    ops::SamplerUpdate u;
    u.form = ops::UpdateForm::kDdim;
    u.v_prediction = config_.prediction == Prediction::kVPrediction;
    u.sqrt_alpha = std::sqrt(a_t);
    u.sqrt_beta = std::sqrt(beta_t);
    u.sqrt_alpha_prev = std::sqrt(a_prev);
    u.direction = std::sqrt(1.0f - a_prev - 0.0f);  // eta = 0: no variance term
    return u;
  }

 private:
  std::vector<float> alphas_;
  int stride_;
};

// ---- DPM-Solver++(2M): multistep, on x0 predictions, in log-SNR time ----
class DpmSolverSampler : public Sampler {
 public:
  DpmSolverSampler(const SchedulerConfig& config, int steps, bool karras) : Sampler(config) {
    const std::vector<float> table = training_sigmas(alphas_cumprod(config));
    std::vector<double> t = dpm_timesteps(config, steps);
    std::vector<double> sigmas;
    if (karras) {
      sigmas = karras_sigmas(table.front(), table.back(), steps);
      const std::vector<float> log_table = log_of(table);
      t.clear();
      for (double s : sigmas) t.push_back(std::nearbyint(sigma_to_timestep(s, log_table)));
    } else {
      for (double ti : t) sigmas.push_back(interpolate_sigma(table, ti));
    }
    sigmas.push_back(0.0);  // final_sigmas_type "zero"
    sigmas_ = to_float(sigmas);
    timesteps_ = to_float(t);
  }

  void add_noise(int i, const float* original, const float* noise, float* out, int64_t count) const override {
    const Coefficients c = coefficients(sigmas_[size_t(i)]);
    for (int64_t j = 0; j < count; ++j) out[j] = c.alpha * original[j] + c.sigma * noise[j];
  }

  ops::SamplerUpdate update(int i) override {
    // First order at the first step (no history yet) and at the last, where the final sigma is zero
    // (diffusers' lower_order_final); second order in between.
    const bool first_order = lower_order_nums_ < 1 || i == steps() - 1;
    const Coefficients s0 = coefficients(sigmas_[size_t(i)]);
    const Coefficients t = coefficients(sigmas_[size_t(i) + 1]);
    const float h = t.lambda - s0.lambda;
    ops::SamplerUpdate u;
    u.form = first_order ? ops::UpdateForm::kDpmFirstOrder : ops::UpdateForm::kDpmSecondOrder;
    u.v_prediction = config_.prediction == Prediction::kVPrediction;
    u.alpha = s0.alpha;
    u.sigma_t = s0.sigma;
    u.ratio = t.sigma / s0.sigma;
    u.phi = t.alpha * (std::exp(-h) - 1.0f);
    if (!first_order) {
      const Coefficients s1 = coefficients(sigmas_[size_t(i) - 1]);
      const float h0 = s0.lambda - s1.lambda;
      const float r0 = h0 / h;
      u.inverse_r0 = 1.0f / r0;
    }
    lower_order_nums_ = std::min(lower_order_nums_ + 1, 2);
    return u;
  }

 private:
  struct Coefficients {
    float alpha, sigma, lambda;
  };
  static Coefficients coefficients(float sigma) {
    const float alpha_t = 1.0f / std::sqrt(sigma * sigma + 1.0f);
    const float sigma_t = sigma * alpha_t;
    return {alpha_t, sigma_t, std::log(alpha_t) - std::log(sigma_t)};
  }

  std::vector<float> sigmas_;
  int lower_order_nums_ = 0;
};

}  // namespace

void check_sampler_schedule(SamplerKind kind, SigmaSchedule schedule) {
  HD_CHECK_KIND(schedule != SigmaSchedule::kKarras || kind == SamplerKind::kEuler || kind == SamplerKind::kDpmpp2m,
                ErrorKind::kUnsupported, "sampler ", sampler_name(kind),
                " has no Karras schedule (diffusers offers it for euler and dpmpp_2m)");
}

std::unique_ptr<Sampler> Sampler::create(SamplerKind kind, SigmaSchedule schedule, const SchedulerConfig& config,
                                         int steps) {
  check_sampler_schedule(kind, schedule);
  const bool karras = schedule == SigmaSchedule::kKarras;
  switch (kind) {
    case SamplerKind::kEuler: return std::make_unique<EulerSampler>(config, steps, false, karras);
    case SamplerKind::kEulerAncestral: return std::make_unique<EulerSampler>(config, steps, true, false);
    case SamplerKind::kDdim: return std::make_unique<DdimSampler>(config, steps);
    case SamplerKind::kDpmpp2m: return std::make_unique<DpmSolverSampler>(config, steps, karras);
  }
  HD_ASSERT(false);
}

}  // namespace hd
