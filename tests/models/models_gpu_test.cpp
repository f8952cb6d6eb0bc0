// The text encoder, UNet and VAE on the GPU (f16 and bf16) against the diffusers / transformers outputs
// that the CPU engine matches to 1e-4 (tests/fixtures/models/tiny_sd{1,2,xl}_components.safetensors).
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "comm/image_split.h"
#include "comm/in_process_group.h"
#include "comm/rank_threads.h"
#include "core/buffer.h"
#include "core/error.h"
#include "core/scratch.h"
#include "fixture_util.h"
#include "io/model_source.h"
#include "models/clip_text_encoder.h"
#include "models/unet.h"
#include "models/unet_graphs.h"
#include "models/vae.h"
#include "ops/gpu/gpu_test_util.h"
#include "ops/ops.h"
#include "ops/placement.h"
#include "test_util.h"

namespace hd {
namespace {

// Relative L2 bounds for a whole network in 16-bit storage: every layer's output is rounded once (f16
// keeps 11 significant bits, 4.9e-4 relative; bf16 8 bits, 3.9e-3), and the roundings of a few dozen
// layers add up to a few of those. Statistics and accumulations are f32 throughout.
double tolerance(DType t) { return t == DType::kF16 ? 5e-3 : 4e-2; }

ops::Placement on_gpu(DType t) { return ops::Placement{test::gpu0(), t}; }

std::string model_dir(const std::string& family) {
  return std::string(HD_SOURCE_DIR) + "/tests/fixtures/models/tiny_" + family;
}

TEST(GpuModels, TextEncoderMatchesTransformers) {
  for (const std::string family : {"sd1", "sd2"}) {
    const ModelSource model = ModelSource::open(model_dir(family));
    const test::Fixture fixture("models/tiny_" + family + "_components.safetensors");
    const std::vector<int64_t> ids64 = fixture.ints("input_ids");
    OwnedTensor ids(Shape{2, 77}, DType::kI32);
    for (size_t i = 0; i < ids64.size(); ++i) ids.ptr<int32_t>()[i] = int32_t(ids64[i]);
    const std::vector<float> expected = fixture.floats("last_hidden_state");
    for (DType t : {DType::kF16, DType::kBF16}) {
      const ClipTextEncoder encoder = ClipTextEncoder::load(*model.component("text_encoder"), on_gpu(t));
      const OwnedTensor hidden = ops::to_host_f32(encoder.forward(ids));
      const double err = test::relative_l2(hidden, std::vector<double>(expected.begin(), expected.end()));
      std::printf("%s text encoder on the GPU in %s: relative L2 %.3g against transformers\n", family.c_str(),
                  std::string(dtype_name(t)).c_str(), err);
      EXPECT_LE(err, tolerance(t)) << family << " " << dtype_name(t);
    }
  }
}

TEST(GpuModels, UnetMatchesDiffusers) {
  for (const std::string family : {"sd1", "sd2"}) {
    const ModelSource model = ModelSource::open(model_dir(family));
    const test::Fixture fixture("models/tiny_" + family + "_components.safetensors");
    const std::vector<float> ctx = fixture.floats("context");
    OwnedTensor context(Shape{2, 77, 32}, DType::kF32);
    std::copy(ctx.begin(), ctx.end(), context.ptr<float>());
    for (DType t : {DType::kF16, DType::kBF16}) {
      const Unet unet = Unet::load(*model.component("unet"), on_gpu(t));
      for (const auto& [name, timestep] : {std::pair{"unet_t537", 537.0f}, {"unet_t12.25", 12.25f}}) {
        const OwnedTensor out = ops::to_host_f32(
            unet.forward(ops::place(fixture.nhwc("sample"), on_gpu(t)), timestep, ops::place(context, on_gpu(t))));
        const double err = test::relative_l2(out, test::as_reference(fixture.nhwc(name)));
        std::printf("%s UNet on the GPU in %s at t=%g: relative L2 %.3g against diffusers\n", family.c_str(),
                    std::string(dtype_name(t)).c_str(), timestep, err);
        EXPECT_LE(err, tolerance(t)) << family << " " << dtype_name(t) << " t=" << timestep;
      }
    }
  }
}

TEST(GpuModels, VaeDecodesAndEncodesAsDiffusers) {
  const ModelSource model = ModelSource::open(model_dir("sd1"));
  const test::Fixture fixture("models/tiny_sd1_components.safetensors");
  for (DType t : {DType::kF16, DType::kBF16}) {
    const Vae vae = Vae::load(*model.component("vae"), on_gpu(t));
    const OwnedTensor image = ops::to_host_f32(vae.decode(ops::place(fixture.nhwc("latents"), on_gpu(t))));
    const double decode_err = test::relative_l2(image, test::as_reference(fixture.nhwc("decoded")));
    const OwnedTensor moments = ops::to_host_f32(vae.encode(ops::place(fixture.nhwc("image"), on_gpu(t))));
    const double encode_err = test::relative_l2(moments, test::as_reference(fixture.nhwc("moments")));
    std::printf("VAE on the GPU in %s: decode relative L2 %.3g, encode %.3g against diffusers\n",
                std::string(dtype_name(t)).c_str(), decode_err, encode_err);
    EXPECT_LE(decode_err, tolerance(t)) << dtype_name(t);
    EXPECT_LE(encode_err, tolerance(t)) << dtype_name(t);
  }
}

// The captured graph replays exactly the plain forward's kernels: bit-identical outputs, for new
// timesteps and contexts copied into the graph's inputs, and per input shape.
TEST(GpuModels, UnetGraphReplaysThePlainForward) {
  const ModelSource model = ModelSource::open(model_dir("sd1"));
  const Unet unet = Unet::load(*model.component("unet"), on_gpu(DType::kF16));
  test::Rng rng;
  HD_SEED_TRACE(rng);
  UnetGraphs graphs;
  for (const auto& [size, steps] : {std::pair{int64_t(8), 4}, std::pair{int64_t(12), 3}}) {
    for (int step = 0; step < steps; ++step) {
      const auto sample = ops::place(test::random_tensor(rng, Shape{2, size, size, 4}), on_gpu(DType::kF16));
      const auto context = ops::place(test::random_tensor(rng, Shape{2, 77, 32}), on_gpu(DType::kF16));
      const float timestep = 999.0f - 250.0f * float(step);
      const OwnedTensor expected = ops::to_host_f32(unet.forward(sample, timestep, context));
      const OwnedTensor got = ops::to_host_f32(graphs.forward(unet, sample, timestep, context));
      EXPECT_EQ(test::relative_l2(got, test::as_reference(expected)), 0.0) << "size " << size << " step " << step;
    }
  }
  EXPECT_EQ(graphs.captured_count(), 2u);  // one graph per shape, captured on its second forward
}

// Scratch memory of one rank's own: ranks sharing a GPU queue their ops on its one stream, and the shared
// scratch buffer is valid only until the next op's call, which may be another rank's. Kept until the rank
// is done.
class RankScratch : public ScratchProvider {
 public:
  void* allocate(const Device& device, size_t bytes) override {
    held_.emplace_back(device, bytes);
    return held_.back().data();
  }

 private:
  std::vector<Buffer> held_;
};

// The exact image split on one GPU, its strips as ranks of an in-process group (device copies, each rank
// its own scratch): each strip's prediction against the same rows of the whole forward on the same GPU, in
// f16. What differs is the kernels' summation order over other shapes (a strip's convolutions and
// attention queries), and each layer's output rounded to f16.
TEST(GpuModels, UnetImageSplitOnOneGpuGivesTheWholeForwardsRows) {
  test::Rng rng;
  HD_SEED_TRACE(rng);
  for (const std::string family : {"sd1", "sdxl"}) {
    SCOPED_TRACE(family);
    const ModelSource model = ModelSource::open(model_dir(family));
    const Unet unet = Unet::load(*model.component("unet"), on_gpu(DType::kF16));
    const UnetConfig& c = unet.config();
    const int64_t n = 2, h = 32, w = 16;
    const auto sample = ops::place(test::random_tensor(rng, Shape{n, h, w, c.in_channels}), on_gpu(DType::kF16));
    const auto context = ops::place(test::random_tensor(rng, Shape{n, 7, c.context_dim}), on_gpu(DType::kF16));
    OwnedTensor timesteps(Shape{n}, DType::kF32, test::gpu0());
    ops::copy(test::random_tensor(rng, Shape{n}, 300.0f), timesteps);
    OwnedTensor text_embeds, time_ids;
    std::optional<TextTimeConditioning> added;
    if (c.text_time()) {
      time_ids = OwnedTensor(Shape{n, 6}, DType::kF32, test::gpu0());
      ops::copy(test::random_tensor(rng, Shape{n, 6}, 100.0f), time_ids);
      text_embeds = ops::place(
          test::random_tensor(rng, Shape{n, c.addition_embed_input_dim - 6 * c.addition_time_embed_dim}),
          on_gpu(DType::kF16));
      added = TextTimeConditioning{text_embeds, time_ids};
    }
    const TextTimeConditioning* extra = added ? &*added : nullptr;
    const OwnedTensor whole = ops::to_host_f32(unet.forward(sample, timesteps, context, extra));
    for (int ranks : {2, 4}) {
      SCOPED_TRACE(testing::Message() << ranks << " strips");
      const int64_t rows = h / ranks;
      comm::InProcessGroup group(ranks, std::chrono::seconds(120));
      std::vector<std::unique_ptr<comm::Communicator>> comms;
      for (int r = 0; r < ranks; ++r) comms.push_back(group.communicator(r, test::gpu0()));
      std::vector<OwnedTensor> parts(static_cast<size_t>(ranks));
      comm::run_ranks(ranks, [&](int rank) {
        RankScratch scratch;
        comm::ImageSplit split(*comms[size_t(rank)]);
        OwnedTensor strip(Shape{n, rows, w, c.in_channels}, DType::kF16, test::gpu0());
        ops::copy(sample.view().slice(1, rank * rows, rows), strip);
        parts[size_t(rank)] = ops::to_host_f32(unet.forward(strip, timesteps, context, extra, &split));
      }, [&](int rank, const std::string& why) { group.fail(rank, why); });
      for (int rank = 0; rank < ranks; ++rank) {
        OwnedTensor expected(parts[size_t(rank)].view().shape, DType::kF32);
        ops::copy(whole.view().slice(1, rank * rows, rows), expected);
        const double err = test::relative_l2(parts[size_t(rank)], test::as_reference(expected));
        std::printf("%s UNet on the GPU, strip %d of %d: relative L2 %.3g against the whole forward\n",
                    family.c_str(), rank, ranks, err);
        EXPECT_LE(err, tolerance(DType::kF16));
      }
    }
  }
}

// SDXL's structure (text-time conditioning, several transformer blocks per attention): the plain forward
// against diffusers, and the captured graph against the plain forward, with new conditioning each step.
TEST(GpuModels, SdxlUnetMatchesDiffusersAndReplays) {
  const ModelSource model = ModelSource::open(model_dir("sdxl"));
  const test::Fixture fixture("models/tiny_sdxl_components.safetensors");
  const OwnedTensor context = fixture.tensor("context");
  const OwnedTensor text_embeds = fixture.tensor("text_embeds");
  const OwnedTensor time_ids = fixture.tensor("time_ids");
  const ops::Placement ids_on_gpu{test::gpu0(), DType::kF32};
  for (DType t : {DType::kF16, DType::kBF16}) {
    const Unet unet = Unet::load(*model.component("unet"), on_gpu(t));
    const OwnedTensor text = ops::place(text_embeds, on_gpu(t)), ids = ops::place(time_ids, ids_on_gpu);
    const TextTimeConditioning added{text, ids};
    for (const auto& [name, timestep] : {std::pair{"unet_t537", 537.0f}, {"unet_t12.25", 12.25f}}) {
      const OwnedTensor out = ops::to_host_f32(unet.forward(ops::place(fixture.nhwc("sample"), on_gpu(t)), timestep,
                                                            ops::place(context, on_gpu(t)), &added));
      const double err = test::relative_l2(out, test::as_reference(fixture.nhwc(name)));
      std::printf("SDXL-like UNet on the GPU in %s at t=%g: relative L2 %.3g against diffusers\n",
                  std::string(dtype_name(t)).c_str(), timestep, err);
      EXPECT_LE(err, tolerance(t)) << dtype_name(t) << " t=" << timestep;
    }
  }
  const Unet unet = Unet::load(*model.component("unet"), on_gpu(DType::kF16));
  test::Rng rng;
  HD_SEED_TRACE(rng);
  UnetGraphs graphs;
  for (int step = 0; step < 4; ++step) {
    const auto sample = ops::place(test::random_tensor(rng, Shape{2, 8, 8, 4}), on_gpu(DType::kF16));
    const auto ctx = ops::place(test::random_tensor(rng, Shape{2, 10, 24}), on_gpu(DType::kF16));
    const auto text = ops::place(test::random_tensor(rng, Shape{2, 24}), on_gpu(DType::kF16));
    OwnedTensor host_ids = OwnedTensor::copy_of(time_ids);
    host_ids.ptr<float>()[0] += float(64 * step);  // a new original height each step
    const auto ids = ops::place(host_ids, ids_on_gpu);
    const TextTimeConditioning added{text, ids};
    const float timestep = 999.0f - 250.0f * float(step);
    const OwnedTensor expected = ops::to_host_f32(unet.forward(sample, timestep, ctx, &added));
    const OwnedTensor got = ops::to_host_f32(graphs.forward(unet, sample, timestep, ctx, &added));
    EXPECT_EQ(test::relative_l2(got, test::as_reference(expected)), 0.0) << "step " << step;
  }
  EXPECT_EQ(graphs.captured_count(), 1u);
}

TEST(GpuModels, InputsNotWhereTheModelComputesAreAnError) {
  const ModelSource model = ModelSource::open(model_dir("sd1"));
  const Unet unet = Unet::load(*model.component("unet"), on_gpu(DType::kF16));
  OwnedTensor host_sample(Shape{1, 8, 8, 4}, DType::kF32), host_context(Shape{1, 77, 32}, DType::kF32);
  EXPECT_THROW(unet.forward(host_sample, 1.0f, host_context), Error);
}

}  // namespace
}  // namespace hd
