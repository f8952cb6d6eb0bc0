// Whole generations on the GPU: the tiny SD1.x/SD2.x pipelines against diffusers' recorded runs, and the
// default model's pictures against the CPU engine's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>

#include "core/error.h"
#include "fixture_util.h"
#include "ops/gpu/gpu_test_util.h"
#include "ops/ops.h"
#include "ops/tuning/autotuner.h"
#include "pipeline/default_model.h"
#include "pipeline/recorded_run.h"
#include "pipeline/stable_diffusion.h"
#include "pipeline/text_conditioning.h"
#include "test_util.h"

namespace hd {
namespace {

// The bound for a picture made in 16-bit storage against one made in f32: 30 dB PSNR.
constexpr double kMinPsnr = 30.0;

// SD1.x, SD2.x and SDXL (both text encoders, size conditioning, zeros for no negative prompt, Turbo-style
// one-to-four-step runs without guidance).
TEST(GpuPipeline, TinyPipelinesMatchDiffusersRecordedRuns) {
  for (const auto& [family, recording, count] : {std::tuple{"sd1", "tiny_sd1_pipeline", 12},
                                                  {"sd2", "tiny_sd2_pipeline", 12},
                                                  {"sdxl_pipeline", "tiny_sdxl_pipeline_runs", 13}}) {
    const StableDiffusion sd = StableDiffusion::load(std::string(HD_SOURCE_DIR) + "/tests/fixtures/models/tiny_" + family,
                                                     std::nullopt, std::nullopt, {test::gpu0(), DType::kF16});
    const test::Fixture fixture(std::string("models/") + recording + ".safetensors");
    int runs = 0;
    for (const auto& c : fixture.cases()) {
      const std::string name = c["name"];
      SCOPED_TRACE(std::string(family) + " " + name);
      GenerationParams p = test::recorded_run_params(c);
      if (!p.spacing) p.spacing = TimestepSpacing::kLeading;  // SD1.x/2.x's runs were recorded with leading spacing
      const test::RunDistance d = test::distance_to_recording(sd.generate(p), fixture, name, std::string(family) + " f16");
      EXPECT_GE(d.image_psnr_db, kMinPsnr);
      ++runs;
    }
    EXPECT_EQ(runs, count);
  }
}

// LoRAs merged on the host as the weights load, then uploaded in f16: the tiny SD1.x (kohya and PEFT forms),
// SD2.x and SDXL pipelines against diffusers' runs with each LoRA fused, and farther from the run without it.
TEST(GpuPipeline, LorasMatchDiffusersRecordedRuns) {
  const std::string models = std::string(HD_SOURCE_DIR) + "/tests/fixtures/models/";
  for (const auto& [family, folder] :
       {std::pair{"sd1", "tiny_sd1"}, {"sd2", "tiny_sd2"}, {"sdxl", "tiny_sdxl_pipeline"}}) {
    const test::Fixture fixture(std::string("models/tiny_") + family + "_lora_runs.safetensors");
    for (const auto& c : fixture.cases()) {
      const std::string name = c["name"];
      SCOPED_TRACE(std::string(family) + " " + name);
      const LoraChoice lora = test::recorded_lora(c);
      const StableDiffusion sd = StableDiffusion::load(models + folder, std::nullopt, std::nullopt,
                                                       {test::gpu0(), DType::kF16}, {&lora, 1});
      const GenerationResult result = sd.generate(test::recorded_run_params(c));
      const test::RunDistance d =
          test::distance_to_recording(result, fixture, name, std::string(family) + " f16 LoRA");
      EXPECT_GE(d.image_psnr_db, kMinPsnr);
      const test::RunDistance none = test::distance_to_recording(result, fixture, "none", "(without it)");
      EXPECT_LT(none.image_psnr_db, d.image_psnr_db - 6.0);
    }
  }
}

TEST(GpuPipeline, DefaultModelDrawsWhatTheCpuDraws) {
  const StableDiffusion cpu = StableDiffusion::load(default_model_folder(), std::nullopt);
  for (DType t : {DType::kF16, DType::kBF16}) {
    const StableDiffusion gpu = StableDiffusion::load(default_model_folder(), std::nullopt, std::nullopt, {test::gpu0(), t});
    for (const char* prompt : {"a red circle on a blue background, top left", "a green triangle on a white background",
                               "a yellow square on a black background, bottom right"}) {
      GenerationParams p;
      p.prompt = prompt;
      p.width = p.height = cpu.default_image_size();
      p.seed = 7;
      const GenerationResult expected = cpu.generate(p), got = gpu.generate(p);
      const double db = test::psnr(got.image, test::as_reference(expected.image));
      std::printf("default model, '%s', GPU %s vs CPU: %.1f dB\n", prompt, std::string(dtype_name(t)).c_str(), db);
      EXPECT_GE(db, kMinPsnr) << prompt << " " << dtype_name(t);
    }
  }
}

// f16 stops at 65504. Latents scaled by 1e6, far past what a sampler produces, are infinite in f16 and
// the decode is NaN; bf16 has f32's range, the decoder's GroupNorms bring the values back to order one,
// and the retry gives a finite picture: the one the CPU engine decodes in f32.
TEST(GpuPipeline, VaeOverflowInF16IsDecodedAgainInBf16) {
  const std::string folder = std::string(HD_SOURCE_DIR) + "/tests/fixtures/models/tiny_sd1";
  const StableDiffusion sd = StableDiffusion::load(folder, std::nullopt, std::nullopt, {test::gpu0(), DType::kF16});
  const test::Fixture fixture("models/tiny_sd1_components.safetensors");
  OwnedTensor latents = fixture.nhwc("latents");
  DecodeReport report;
  report.retried_in_bf16 = true;
  sd.decode(latents, &report);
  EXPECT_FALSE(report.retried_in_bf16);  // ordinary latents stay in f16
  for (int64_t i = 0; i < latents.view().numel(); ++i) latents.ptr<float>()[i] *= 1e6f;
  const OwnedTensor huge = sd.decode(latents, &report);
  EXPECT_TRUE(report.retried_in_bf16);
  const float* v = huge.ptr<float>();
  EXPECT_TRUE(std::all_of(v, v + huge.view().numel(), [](float x) { return std::isfinite(x); }));
  // The bf16 decode is the VAE's own answer for those latents: the CPU's, within bf16's rounding.
  const StableDiffusion cpu = StableDiffusion::load(folder, std::nullopt);
  const OwnedTensor expected = cpu.decode(latents, &report);
  EXPECT_FALSE(report.retried_in_bf16);
  EXPECT_LE(test::relative_l2(huge, test::as_reference(expected)), 4e-2);
}

// SDXL's VAE computes in bf16 on an f16 GPU when its config says force_upcast (diffusers: in f32), and
// in f16 once an f16-safe VAE (force_upcast false, as madebyollin/sdxl-vae-fp16-fix says) replaces it;
// either way the picture is the CPU's within the dtype's rounding.
TEST(GpuPipeline, SdxlVaeFollowsForceUpcast) {
  const std::string folder = std::string(HD_SOURCE_DIR) + "/tests/fixtures/models/tiny_sdxl_pipeline";
  StableDiffusion sd = StableDiffusion::load(folder, std::nullopt, std::nullopt, {test::gpu0(), DType::kF16});
  EXPECT_TRUE(sd.vae_upcast());
  const StableDiffusion cpu = StableDiffusion::load(folder, std::nullopt);
  const test::Fixture fixture("models/tiny_sdxl_pipeline_runs.safetensors");
  OwnedTensor latents = fixture.nhwc("euler_discrete_cfg5.latents");
  for (int64_t i = 0; i < latents.view().numel(); ++i) latents.ptr<float>()[i] /= 0.13025f;
  DecodeReport report;
  const OwnedTensor expected = cpu.decode(latents, &report);
  EXPECT_LE(test::relative_l2(sd.decode(latents, &report), test::as_reference(expected)), 2e-2);
  EXPECT_FALSE(report.retried_in_bf16);

  test::TempDir dir;
  std::filesystem::copy(folder + "/vae", dir.path());
  const auto config_path = dir.path() / "config.json";
  std::ifstream in(config_path);
  nlohmann::json config = nlohmann::json::parse(in);
  in.close();
  config["force_upcast"] = false;
  std::ofstream(config_path) << config.dump(2);
  sd.use_vae(dir.path().string());
  EXPECT_FALSE(sd.vae_upcast());
  EXPECT_LE(test::relative_l2(sd.decode(latents, &report), test::as_reference(expected)), 1e-2);
  EXPECT_FALSE(report.retried_in_bf16);
}

// Tiled decoding holds one tile's activations at a time: on the GPU the decode's own peak memory is a
// fraction of the whole decode's and stays put as the image grows four-fold. Blended tiles give the
// picture the CPU decodes in blended tiles; exact tiles the whole decode's, and they are what the decode
// falls back to by itself when the whole one runs out of memory.
TEST(GpuPipeline, TiledVaeDecodeBoundsPeakMemory) {
  // The kernels this test's decodes run are chosen here, in memory, not taken from what earlier tests
  // left in the shared tuning cache (nor from their near sizes): a library engine's workspace counts in
  // the decode's peak, and with whatever the cache held the tiled peak came within 3% of its bound.
  struct PrivateTuning {
    const std::string path = ops::tune_cache_path();
    PrivateTuning() { ops::set_tune_cache_path(""); }
    ~PrivateTuning() { ops::set_tune_cache_path(path); }
  } private_tuning;
  const StableDiffusion gpu = StableDiffusion::load(default_model_folder(), std::nullopt, std::nullopt,
                                                    {test::gpu0(), DType::kF16});
  const StableDiffusion cpu = StableDiffusion::load(default_model_folder(), std::nullopt);
  test::Rng rng;
  HD_SEED_TRACE(rng);
  const auto decode_peak = [&](const Tensor& latents, VaeTiling tiling, OwnedTensor* image) {
    DecodeReport report;
    const size_t before = ops::mark_device_memory(test::gpu0());
    *image = gpu.decode(latents, &report, tiling);
    EXPECT_EQ(report.tiled, tiling != VaeTiling::kAuto);
    return ops::peak_device_memory(test::gpu0(), true) - before;
  };
  OwnedTensor image;
  const OwnedTensor small = test::random_tensor(rng, Shape{1, 32, 32, 4}), large = test::random_tensor(rng, Shape{1, 64, 64, 4});
  // Each decode once before any is measured: a shape's first use is tuned (under the quick policy, inside
  // the decode), and the tuning's trial buffers are not the decode's own memory. Which shapes a process
  // still has to tune depends on the tuning cache the earlier tests left.
  for (const VaeTiling tiling : {VaeTiling::kAuto, VaeTiling::kBlended, VaeTiling::kExact}) {
    DecodeReport ignored;
    for (const Tensor* latents : {&small.view(), &large.view()}) (void)gpu.decode(*latents, &ignored, tiling);
  }
  const size_t whole_large = decode_peak(large, VaeTiling::kAuto, &image);
  const size_t tiled_small = decode_peak(small, VaeTiling::kBlended, &image);
  const size_t tiled_large = decode_peak(large, VaeTiling::kBlended, &image);
  std::printf("VAE decode's own peak, 256x256: whole %.1f MiB, tiled %.1f MiB; tiled 128x128: %.1f MiB\n",
              whole_large / 1048576.0, tiled_large / 1048576.0, tiled_small / 1048576.0);
  EXPECT_LT(tiled_large * 4, whole_large);      // 16-latent tiles against a 64-latent image
  EXPECT_LE(tiled_large, tiled_small * 5 / 4);  // one tile's worth, whatever the image size
  DecodeReport report;
  const OwnedTensor expected = cpu.decode(large, &report, VaeTiling::kBlended);
  EXPECT_GE(test::psnr(image, test::as_reference(expected)), 40.0);

  // Exact tiles (the whole image's GroupNorm statistics, halos as wide as the receptive field): the whole
  // decode's picture, with a peak that grows far slower than the whole decode's. Not flat: the
  // latent-resolution head (conv_in and the mid block with its attention) runs whole by design, so its
  // activations grow with the latents (2.6 MiB from 32x32 to 64x64 latents on an H100, 2026-11-26, once
  // the GEMM candidates' temporaries stopped being allocated per call and hiding it).
  // The whole decode's peaks once the process's lasting buffers (scratch, workspaces) exist: the first
  // decode's above counts their growth too.
  OwnedTensor whole, exact;
  const size_t whole_small = decode_peak(small, VaeTiling::kAuto, &whole);
  const size_t whole_again = decode_peak(large, VaeTiling::kAuto, &whole);
  const size_t exact_small = decode_peak(small, VaeTiling::kExact, &exact);
  const size_t exact_large = decode_peak(large, VaeTiling::kExact, &exact);
  const double error = test::relative_l2(exact, test::as_reference(whole));
  std::printf("exact tiles: own peak %.1f MiB at 256x256, %.1f MiB at 128x128 (whole: %.1f and %.1f MiB); relative "
              "L2 %.2e against whole\n", exact_large / 1048576.0, exact_small / 1048576.0, whole_again / 1048576.0,
              whole_small / 1048576.0, error);
  EXPECT_LE(error, 1e-2);
  EXPECT_LT(exact_large * 2, whole_again);
  ASSERT_GT(whole_again, whole_small);
  EXPECT_LT(std::max(exact_large, exact_small) - exact_small, (whole_again - whole_small) / 4);

  // A device memory limit between the two peaks: the whole decode runs out, the exact tiles take over.
  const size_t held = ops::mark_device_memory(test::gpu0()), limit = (exact_large + whole_again) / 2;
  ops::set_device_memory_limit(test::gpu0(), held + limit);
  DecodeReport fallback;
  OwnedTensor automatic;
  try {
    automatic = gpu.decode(large, &fallback, VaeTiling::kAuto);
  } catch (...) {
    ops::set_device_memory_limit(test::gpu0(), 0);
    throw;
  }
  ops::set_device_memory_limit(test::gpu0(), 0);
  EXPECT_TRUE(fallback.tiled);
  EXPECT_LE(ops::peak_device_memory(test::gpu0(), true) - held, limit);
  EXPECT_LE(test::relative_l2(automatic, test::as_reference(whole)), 1e-2);

  // Below even one tile's worth: a clear out-of-memory error, and the device usable afterwards.
  ops::set_device_memory_limit(test::gpu0(), held + exact_large / 2);
  try {
    gpu.decode(large, &fallback, VaeTiling::kAuto);
    ADD_FAILURE() << "decoded within " << exact_large / 2 << " bytes";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kOutOfMemory) << e.what();
    EXPECT_NE(std::string(e.what()).find("limit"), std::string::npos) << e.what();
  }
  ops::set_device_memory_limit(test::gpu0(), 0);
  gpu.decode(small, &fallback, VaeTiling::kAuto);
}

// A small GPU's text encoders wait in host memory between encodes: the device memory they held is
// given back, and what they compute is bit for bit what they computed on the device.
TEST(GpuPipeline, TextEncodersKeptOffTheDeviceGiveTheSameConditioning) {
  const std::string folder = std::string(HD_SOURCE_DIR) + "/tests/fixtures/models/tiny_sdxl_pipeline";
  const ModelSource model = ModelSource::open(folder);
  const Device gpu = test::gpu0();
  const size_t before = ops::device_memory_in_use(gpu);
  TextConditioning text = TextConditioning::load(model, ModelFamily::kSDXL, std::nullopt, {gpu, DType::kF16});
  const size_t weights = ops::device_memory_in_use(gpu) - before;  // loading allocates the weights only
  const PromptConditioning on = text.encode("a red circle on a blue background", 2);
  const std::vector<double> context = test::as_reference(ops::to_host_f32(on.context));
  const std::vector<double> pooled = test::as_reference(ops::to_host_f32(on.pooled));
  const size_t held_on = ops::device_memory_in_use(gpu);
  text.keep_off_device(true);
  EXPECT_TRUE(text.kept_off_device());
  const size_t held_off = ops::device_memory_in_use(gpu);
  std::printf("text encoders: %zu bytes of weights; moving them off gave back %zu\n", weights, held_on - held_off);
  size_t parameter_bytes = 0;  // the encoders' parameters, in f16
  for (const char* name : {"text_encoder", "text_encoder_2"})
    for (const auto& t : model.component(name)->tensors) parameter_bytes += size_t(t.entry->numel) * 2;
  EXPECT_GE(weights, parameter_bytes);
  EXPECT_EQ(held_on - held_off, weights);
  // The first encode off the device brings the weights from the page-locked copies made when they left,
  // the second from the same copies again.
  for (int trip = 0; trip < 2; ++trip) {
    const PromptConditioning off = text.encode("a red circle on a blue background", 2);
    EXPECT_LT(ops::device_memory_in_use(gpu) - held_off, weights / 4);  // the outputs only: the weights left again
    EXPECT_EQ(test::relative_l2(ops::to_host_f32(off.context), context), 0.0);
    EXPECT_EQ(test::relative_l2(ops::to_host_f32(off.pooled), pooled), 0.0);
  }
  // Back on the device for good, from those copies too.
  text.keep_off_device(false);
  EXPECT_EQ(ops::device_memory_in_use(gpu) - held_off, weights);
  const PromptConditioning back = text.encode("a red circle on a blue background", 2);
  EXPECT_EQ(test::relative_l2(ops::to_host_f32(back.context), context), 0.0);
}

// The pipeline keeps them off the device by itself when its weights take more than 60% of the budget.
TEST(GpuPipeline, ShortDeviceMemoryKeepsTheTextEncodersOffTheDevice) {
  const std::string folder = std::string(HD_SOURCE_DIR) + "/tests/fixtures/models/tiny_sdxl_pipeline";
  const Device gpu = test::gpu0();
  {
    const StableDiffusion roomy = StableDiffusion::load(folder, std::nullopt, std::nullopt, {gpu, DType::kF16});
    EXPECT_FALSE(roomy.text_encoders_off_device());
  }
  const size_t before = ops::device_memory_in_use(gpu);
  size_t weights = 0;
  {
    const StableDiffusion sd = StableDiffusion::load(folder, std::nullopt, std::nullopt, {gpu, DType::kF16});
    weights = ops::device_memory_in_use(gpu) - before;
  }
  ops::set_device_memory_limit(gpu, before + weights + weights / 2);  // the weights: 67% of it
  const StableDiffusion tight = StableDiffusion::load(folder, std::nullopt, std::nullopt, {gpu, DType::kF16});
  ops::set_device_memory_limit(gpu, 0);
  EXPECT_TRUE(tight.text_encoders_off_device());
}

}  // namespace
}  // namespace hd
