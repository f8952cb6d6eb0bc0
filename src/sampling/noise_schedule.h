// The training noise schedule of a diffusion model (betas -> cumulative alphas -> sigmas) and the
// inference timesteps chosen from it, computed as diffusers computes them: float32 where diffusers
// holds torch float32 tensors, double where it goes through numpy, so that the samplers reproduce
// diffusers' numbers, not only its formulas.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace hd {

enum class BetaSchedule { kScaledLinear, kLinear };
enum class TimestepSpacing { kLeading, kTrailing, kLinspace };
enum class Prediction { kEpsilon, kVPrediction };

// The fields of diffusers' scheduler_config.json that Stable Diffusion uses; the defaults are SD's
// (and what single-file checkpoints get).
struct SchedulerConfig {
  int num_train_timesteps = 1000;
  float beta_start = 0.00085f;
  float beta_end = 0.012f;
  BetaSchedule beta_schedule = BetaSchedule::kScaledLinear;
  int steps_offset = 1;
  TimestepSpacing spacing = TimestepSpacing::kLeading;
  Prediction prediction = Prediction::kEpsilon;
  bool set_alpha_to_one = false;  // DDIM: the alpha after the last step (false: alphas_cumprod[0])
};

// diffusers' scheduler_config.json. Keys it does not have take SD's values (so an SD1.5 PNDM config,
// which has no timestep_spacing, spaces "leading", as its PNDMScheduler does). Settings SD pipelines
// never use (trained_betas, rescaled zero-SNR betas, other beta schedules) are refused, not ignored.
SchedulerConfig scheduler_config_from_json(const std::string& json_text);

TimestepSpacing parse_timestep_spacing(std::string_view name);  // throws Error naming the choices
Prediction parse_prediction(std::string_view name);

// alphas_cumprod[t] for t in [0, num_train_timesteps), float32 as torch computes it.
std::vector<float> alphas_cumprod(const SchedulerConfig& config);
// sqrt((1 - a) / a) per entry, float32.
std::vector<float> training_sigmas(const std::vector<float>& alphas_cumprod);

// Inference timesteps, descending, for `steps` steps, as Euler/DDIM (`steps` points) or DPM-Solver
// (`steps` + 1 points with the last dropped) space them. Values are exact integers except for the
// Euler samplers' linspace spacing.
std::vector<double> euler_timesteps(const SchedulerConfig& config, int steps);
std::vector<double> ddim_timesteps(const SchedulerConfig& config, int steps);
std::vector<double> dpm_timesteps(const SchedulerConfig& config, int steps);

// numpy.interp of the training sigmas at fractional timesteps.
double interpolate_sigma(const std::vector<float>& sigmas, double t);
// Karras et al. (2022) sigmas, rho = 7, from sigma_max to sigma_min in `steps` points.
std::vector<double> karras_sigmas(double sigma_min, double sigma_max, int steps);
// The fractional timestep whose log-sigma interpolates to log(sigma), as diffusers' _sigma_to_t.
double sigma_to_timestep(double sigma, const std::vector<float>& log_sigmas);

}  // namespace hd
