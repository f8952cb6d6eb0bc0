#include "sampling/noise_schedule.h"

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>
#include <type_traits>

#include "core/error.h"

namespace hd {

TimestepSpacing parse_timestep_spacing(std::string_view name) {
  if (name == "leading") return TimestepSpacing::kLeading;
  if (name == "trailing") return TimestepSpacing::kTrailing;
  if (name == "linspace") return TimestepSpacing::kLinspace;
  throw Error(ErrorKind::kInvalidInput,
              str_cat("unknown timestep_spacing '", name, "' (expected leading, trailing or linspace)"));
}

Prediction parse_prediction(std::string_view name) {
  if (name == "epsilon") return Prediction::kEpsilon;
  if (name == "v_prediction") return Prediction::kVPrediction;
  throw Error(ErrorKind::kUnsupported,
              str_cat("unsupported prediction_type '", name, "' (expected epsilon or v_prediction)"));
}

SchedulerConfig scheduler_config_from_json(const std::string& json_text) {
  const auto j = nlohmann::json::parse(json_text, nullptr, false);
  HD_CHECK(!j.is_discarded() && j.is_object(), "scheduler_config.json is not a JSON object");
  SchedulerConfig c;
  const auto number = [&](const char* key, auto& field) {
    if (!j.contains(key) || j[key].is_null()) return;
    HD_CHECK(j[key].is_number(), "scheduler_config.json: ", key, " is not a number");
    field = j[key].get<std::remove_reference_t<decltype(field)>>();
  };
  number("num_train_timesteps", c.num_train_timesteps);
  number("beta_start", c.beta_start);
  number("beta_end", c.beta_end);
  number("steps_offset", c.steps_offset);
  if (j.contains("beta_schedule")) {
    const std::string s = j["beta_schedule"].get<std::string>();
    HD_CHECK_KIND(s == "scaled_linear" || s == "linear", ErrorKind::kUnsupported,
                  "scheduler_config.json: unsupported beta_schedule '", s, "'");
    c.beta_schedule = s == "linear" ? BetaSchedule::kLinear : BetaSchedule::kScaledLinear;
  }
  if (j.contains("timestep_spacing") && !j["timestep_spacing"].is_null())
    c.spacing = parse_timestep_spacing(j["timestep_spacing"].get<std::string>());
  if (j.contains("prediction_type")) c.prediction = parse_prediction(j["prediction_type"].get<std::string>());
  if (j.contains("set_alpha_to_one") && j["set_alpha_to_one"].is_boolean()) c.set_alpha_to_one = j["set_alpha_to_one"].get<bool>();
  HD_CHECK_KIND(!j.contains("trained_betas") || j["trained_betas"].is_null(), ErrorKind::kUnsupported,
                "scheduler_config.json: trained_betas are not supported");
  HD_CHECK_KIND(!j.value("rescale_betas_zero_snr", false), ErrorKind::kUnsupported,
                "scheduler_config.json: rescale_betas_zero_snr is not supported");
  return c;
}

namespace {

// torch.linspace in float32: the first half counts up from start, the second half down from end.
std::vector<float> torch_linspace_f32(float start, float end, int steps) {
  std::vector<float> v(static_cast<size_t>(steps));
  if (steps == 1) {
    v[0] = start;
    return v;
  }
  const float step = (end - start) / float(steps - 1);
  const int halfway = steps / 2;
  for (int i = 0; i < steps; ++i) v[size_t(i)] = i < halfway ? start + step * float(i) : end - step * float(steps - i - 1);
  return v;
}

// numpy.arange(start, stop, step) for a negative step in double, as the trailing spacings call it.
std::vector<double> arange_down(double start, double stop, double step) {
  std::vector<double> v;
  const auto n = int64_t(std::ceil((stop - start) / step));
  for (int64_t i = 0; i < n; ++i) v.push_back(start + double(i) * step);
  return v;
}

// numpy.round: halves to even, as np.rint.
double np_round(double x) { return std::nearbyint(x); }

// Element i of np.linspace(0, stop, count) in double: i * step, with the end point exact.
double linspace_at(double stop, int count, int i) {
  if (count == 1) return 0.0;
  if (i == count - 1) return stop;
  return double(i) * (stop / double(count - 1));
}

void check_steps(const SchedulerConfig& config, int steps) {
  HD_CHECK(steps >= 1, "steps must be positive, got ", steps);
  HD_CHECK(steps <= config.num_train_timesteps, steps, " steps exceed the ", config.num_train_timesteps,
           " training timesteps");
}

}  // namespace

std::vector<float> alphas_cumprod(const SchedulerConfig& config) {
  HD_CHECK(config.num_train_timesteps >= 2, "num_train_timesteps must be at least 2");
  std::vector<float> betas;
  if (config.beta_schedule == BetaSchedule::kScaledLinear) {
    betas = torch_linspace_f32(std::sqrt(config.beta_start), std::sqrt(config.beta_end), config.num_train_timesteps);
    for (float& b : betas) b = b * b;
  } else {
    betas = torch_linspace_f32(config.beta_start, config.beta_end, config.num_train_timesteps);
  }
  // torch.cumprod on the CPU carries the running product in double and stores each prefix as float.
  std::vector<float> out(betas.size());
  double running = 1.0;
  for (size_t i = 0; i < betas.size(); ++i) {
    running *= double(1.0f - betas[i]);
    out[i] = float(running);
  }
  return out;
}

std::vector<float> training_sigmas(const std::vector<float>& ac) {
  std::vector<float> s(ac.size());
  for (size_t i = 0; i < ac.size(); ++i) s[i] = std::sqrt((1.0f - ac[i]) / ac[i]);
  return s;
}

std::vector<double> euler_timesteps(const SchedulerConfig& config, int steps) {
  check_steps(config, steps);
  const int n_train = config.num_train_timesteps;
  std::vector<double> t;
  switch (config.spacing) {
    case TimestepSpacing::kLinspace: {
      // np.linspace(0, N - 1, steps, dtype=float32), reversed: computed in double, stored as float32.
      for (int i = steps - 1; i >= 0; --i) t.push_back(double(float(linspace_at(n_train - 1, steps, i))));
      break;
    }
    case TimestepSpacing::kLeading: {
      const int ratio = n_train / steps;
      for (int i = steps - 1; i >= 0; --i) t.push_back(double(i * ratio + config.steps_offset));
      break;
    }
    case TimestepSpacing::kTrailing: {
      for (double v : arange_down(n_train, 0, -double(n_train) / steps)) t.push_back(np_round(v) - 1.0);
      break;
    }
  }
  return t;
}

std::vector<double> ddim_timesteps(const SchedulerConfig& config, int steps) {
  if (config.spacing != TimestepSpacing::kLinspace) return euler_timesteps(config, steps);
  check_steps(config, steps);
  std::vector<double> t;  // np.linspace(0, N - 1, steps).round(), reversed, as integers
  for (int i = steps - 1; i >= 0; --i) t.push_back(np_round(linspace_at(config.num_train_timesteps - 1, steps, i)));
  return t;
}

std::vector<double> dpm_timesteps(const SchedulerConfig& config, int steps) {
  check_steps(config, steps);
  const int last = config.num_train_timesteps;  // lambda_min_clipped = -inf clips nothing
  std::vector<double> t;
  switch (config.spacing) {
    case TimestepSpacing::kLinspace:
      for (int i = steps; i >= 1; --i) t.push_back(np_round(linspace_at(last - 1, steps + 1, i)));
      break;
    case TimestepSpacing::kLeading: {
      const int ratio = last / (steps + 1);
      for (int i = steps; i >= 1; --i) t.push_back(double(i * ratio + config.steps_offset));
      break;
    }
    case TimestepSpacing::kTrailing:
      for (double v : arange_down(last, 0, -double(config.num_train_timesteps) / steps)) t.push_back(np_round(v) - 1.0);
      break;
  }
  return t;
}

double interpolate_sigma(const std::vector<float>& sigmas, double t) {
  if (t <= 0.0) return sigmas.front();
  if (t >= double(sigmas.size() - 1)) return sigmas.back();
  const auto j = size_t(std::floor(t));
  const double slope = double(sigmas[j + 1]) - double(sigmas[j]);  // xp spacing is 1
  return slope * (t - double(j)) + double(sigmas[j]);
}

std::vector<double> karras_sigmas(double sigma_min, double sigma_max, int steps) {
  constexpr double kRho = 7.0;
  const double min_inv_rho = std::pow(sigma_min, 1.0 / kRho), max_inv_rho = std::pow(sigma_max, 1.0 / kRho);
  std::vector<double> s;
  for (int i = 0; i < steps; ++i) {
    const double ramp = steps == 1 ? 0.0 : double(i) / double(steps - 1);
    s.push_back(std::pow(max_inv_rho + ramp * (min_inv_rho - max_inv_rho), kRho));
  }
  return s;
}

double sigma_to_timestep(double sigma, const std::vector<float>& log_sigmas) {
  const double log_sigma = std::log(std::max(sigma, 1e-10));
  // low: the last index whose log-sigma is <= log_sigma (the table ascends), kept below the end.
  size_t low = 0;
  for (size_t i = 0; i < log_sigmas.size(); ++i)
    if (log_sigma - double(log_sigmas[i]) >= 0) low = i;
  low = std::min(low, log_sigmas.size() - 2);
  const double lo = log_sigmas[low], hi = log_sigmas[low + 1];
  const double w = std::clamp((lo - log_sigma) / (lo - hi), 0.0, 1.0);
  return (1.0 - w) * double(low) + w * double(low + 1);
}

}  // namespace hd
