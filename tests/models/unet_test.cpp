// The UNet against diffusers' UNet2DConditionModel on tiny seeded models of both families
// (tests/fixtures/models/tiny_sd{1,2}/unet, f16 weights, recorded by tools/make_fixtures.py --only models)
// and of SDXL's structure (tiny_sdxl/unet, --only sdxl).
#include "models/unet.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>

#include "comm/image_split.h"
#include "comm/in_process_group.h"
#include "comm/strip_ranks.h"
#include "core/error.h"
#include "fixture_util.h"
#include "io/safetensors.h"
#include "models/weights.h"
#include "ops/ops.h"
#include "test_util.h"

namespace hd {
namespace {

void check_family(const std::string& family, bool linear_projection, std::vector<int> heads) {
  const ModelSource model = ModelSource::open(std::string(HD_SOURCE_DIR) + "/tests/fixtures/models/tiny_" + family);
  const Unet unet = Unet::load(*model.component("unet"));
  EXPECT_EQ(unet.config().linear_projection, linear_projection);
  EXPECT_EQ(unet.config().heads, heads);
  EXPECT_EQ(unet.config().context_dim, 32);

  const test::Fixture fixture("models/tiny_" + family + "_components.safetensors");
  const OwnedTensor sample = fixture.nhwc("sample");
  const std::vector<float> ctx = fixture.floats("context");
  OwnedTensor context(Shape{2, 77, 32}, DType::kF32);
  std::copy(ctx.begin(), ctx.end(), context.ptr<float>());
  // An integer timestep, and a fractional one as Karras sigmas give.
  for (const auto& [name, timestep] : {std::pair{"unet_t537", 537.0f}, {"unet_t12.25", 12.25f}}) {
    const OwnedTensor out = unet.forward(sample, timestep, context);
    const double err = test::relative_l2(out, test::as_reference(fixture.nhwc(name)));
    std::printf("%s UNet at t=%g: relative L2 error %.3g against diffusers\n", family.c_str(), timestep, err);
    EXPECT_LT(err, 1e-4);
  }
}

TEST(Unet, Sd1MatchesDiffusers) { check_family("sd1", false, {4, 4}); }
TEST(Unet, Sd2MatchesDiffusers) { check_family("sd2", true, {2, 4}); }

// SDXL's structure: a first level without attention, 1/2/3 transformer blocks per attention (3 in the mid
// block), and the text-time embedding of a pooled text embedding and six size ids added to the time
// embedding.
TEST(Unet, SdxlMatchesDiffusers) {
  const ModelSource model = ModelSource::open(std::string(HD_SOURCE_DIR) + "/tests/fixtures/models/tiny_sdxl");
  const Unet unet = Unet::load(*model.component("unet"));
  const UnetConfig& c = unet.config();
  EXPECT_EQ(c.block_out_channels, (std::vector<int64_t>{16, 32, 32}));
  EXPECT_EQ(c.cross_attention, (std::vector<bool>{false, true, true}));
  EXPECT_EQ(c.transformer_depth, (std::vector<int>{0, 2, 3}));
  EXPECT_EQ(c.heads, (std::vector<int>{2, 2, 4}));
  EXPECT_TRUE(c.linear_projection);
  EXPECT_EQ(c.context_dim, 24);
  EXPECT_EQ(c.addition_time_embed_dim, 8);
  EXPECT_EQ(c.addition_embed_input_dim, 72);

  const test::Fixture fixture("models/tiny_sdxl_components.safetensors");
  const OwnedTensor sample = fixture.nhwc("sample");
  const OwnedTensor context = fixture.tensor("context");
  const OwnedTensor text_embeds = fixture.tensor("text_embeds");
  const OwnedTensor time_ids = fixture.tensor("time_ids");
  const TextTimeConditioning added{text_embeds, time_ids};
  for (const auto& [name, timestep] : {std::pair{"unet_t537", 537.0f}, {"unet_t12.25", 12.25f}}) {
    const OwnedTensor out = unet.forward(sample, timestep, context, &added);
    const double err = test::relative_l2(out, test::as_reference(fixture.nhwc(name)));
    std::printf("SDXL-like UNet at t=%g: relative L2 error %.3g against diffusers\n", timestep, err);
    EXPECT_LT(err, 1e-4);
  }
  // The conditioning is the model's input: required, and of the widths add_embedding takes.
  EXPECT_THROW(unet.forward(sample, 10.0f, context), Error);
  const OwnedTensor five_ids(Shape{2, 5}, DType::kF32);
  const TextTimeConditioning short_ids{text_embeds, five_ids};
  EXPECT_THROW(unet.forward(sample, 10.0f, context, &short_ids), Error);
}

// The exact image split: each rank's strip of the prediction equals the same rows of the whole forward,
// at 2 and 4 strips (ranks of an in-process group), for an SD1-like and an SDXL-like UNet.
TEST(Unet, ImageSplitGivesTheWholeForwardsRows) {
  test::Rng rng;
  HD_SEED_TRACE(rng);
  for (const char* family : {"sd1", "sdxl"}) {
    SCOPED_TRACE(family);
    const ModelSource model = ModelSource::open(std::string(HD_SOURCE_DIR) + "/tests/fixtures/models/tiny_" + family);
    const Unet unet = Unet::load(*model.component("unet"));
    const UnetConfig& c = unet.config();
    const int64_t n = 2, h = 16, w = 8;
    const OwnedTensor sample = test::random_tensor(rng, Shape{n, h, w, c.in_channels});
    const OwnedTensor context = test::random_tensor(rng, Shape{n, 5, c.context_dim});
    OwnedTensor timesteps(Shape{n}, DType::kF32);
    timesteps.ptr<float>()[0] = 401.0f, timesteps.ptr<float>()[1] = 17.5f;
    OwnedTensor text_embeds, time_ids;
    std::optional<TextTimeConditioning> added;
    if (c.text_time()) {
      time_ids = test::random_tensor(rng, Shape{n, 6}, 100.0f);
      text_embeds = test::random_tensor(rng, Shape{n, c.addition_embed_input_dim - 6 * c.addition_time_embed_dim});
      added = TextTimeConditioning{text_embeds, time_ids};
    }
    const TextTimeConditioning* extra = added ? &*added : nullptr;
    const OwnedTensor whole = unet.forward(sample, timesteps, context, extra);
    for (int ranks : {2, 4}) {
      SCOPED_TRACE(testing::Message() << ranks << " strips");
      const int64_t rows = h / ranks;
      test::on_strips(ranks, [&](int rank, comm::ImageSplit& split) {
        const OwnedTensor part =
            unet.forward(test::rows_of(sample, rank * rows, rows), timesteps, context, extra, &split);
        const OwnedTensor expected = test::rows_of(whole, rank * rows, rows);
        const double err = test::relative_l2(part, test::as_reference(expected));
        std::printf("%s UNet, strip %d of %d: relative L2 %.3g against the whole forward\n", family, rank, ranks, err);
        // f32 rounding only: the strips' GroupNorm statistics are combined by Chan's formula and their
        // GEMMs block fewer rows (720 strips measured 0.53e-6 to 1.13e-6; CI once saw 1.08e-6 against
        // the old bound of 1e-6). A wrong halo row or a missed exchange gives 1e-2 and more.
        EXPECT_LE(err, 3e-6);
      });
    }
    // A strip whose rows do not line up with the downsampling is refused before anything is exchanged.
    comm::InProcessGroup lone(1);
    const std::unique_ptr<comm::Communicator> one = lone.communicator(0);
    comm::ImageSplit split(*one);
    const OwnedTensor odd = test::random_tensor(rng, Shape{n, unet.split_row_multiple() + 1, w, c.in_channels});
    test::expect_error_containing([&] { (void)unet.forward(odd, timesteps, context, extra, &split); }, "(a strip)");
  }
}

TEST(Unet, RefusesTextTimeConditioningWithoutAddEmbedding) {
  const ModelSource model = ModelSource::open(std::string(HD_SOURCE_DIR) + "/tests/fixtures/models/tiny_sd2");
  const Unet unet = Unet::load(*model.component("unet"));
  EXPECT_FALSE(unet.config().text_time());
  const OwnedTensor sample(Shape{1, 4, 4, 4}, DType::kF32), context(Shape{1, 77, 32}, DType::kF32);
  const OwnedTensor text(Shape{1, 24}, DType::kF32), ids(Shape{1, 6}, DType::kF32);
  const TextTimeConditioning added{text, ids};
  EXPECT_THROW(unet.forward(sample, 10.0f, context, &added), Error);
}

TEST(Unet, RejectsBadShapes) {
  const ModelSource model = ModelSource::open(std::string(HD_SOURCE_DIR) + "/tests/fixtures/models/tiny_sd1");
  const Unet unet = Unet::load(*model.component("unet"));
  OwnedTensor odd(Shape{1, 5, 6, 4}, DType::kF32), context(Shape{1, 77, 32}, DType::kF32), wrong_ctx(Shape{1, 77, 7}, DType::kF32);
  EXPECT_THROW(unet.forward(odd, 10.0f, context), Error);  // 5 is not a multiple of 2
  OwnedTensor ok(Shape{1, 4, 6, 4}, DType::kF32);
  EXPECT_THROW(unet.forward(ok, 10.0f, wrong_ctx), Error);
}

// A caller's copies of a component's tensors, each as the engine lays it out (a kernel [Cout, kh, kw, Cin]),
// and views of them by name: what held_component takes.
struct HeldCopies {
  std::vector<OwnedTensor> memory;
  std::vector<std::pair<std::string, Tensor>> views;
};

HeldCopies held_copies(const ModelComponent& component) {
  const WeightReader reader(component, "");
  HeldCopies held;
  held.memory.reserve(component.tensors.size());
  for (const TensorRef& t : component.tensors) {
    const std::vector<int64_t> s = t.shape();
    Shape shape;
    for (int64_t d : s) shape.push_back(d);
    held.memory.push_back(s.size() == 4 ? reader.load_conv(t.name, s[0], s[1], s[2], s[3]) : reader.load(t.name, shape));
    held.views.emplace_back(t.name, held.memory.back().view());
  }
  return held;
}

// Seeded inputs of an SDXL-structured UNet: a batch of 2 at 8x8, 77 context tokens, the pooled text
// embedding and six ids (SDXL's count) as pixel sizes.
struct SdxlInputs {
  OwnedTensor sample, context, text_embeds, time_ids;
  int64_t text_width = 0;
};

SdxlInputs random_sdxl_inputs(test::Rng& rng, const UnetConfig& c) {
  SdxlInputs in;
  in.sample = test::random_tensor(rng, Shape{2, 8, 8, c.in_channels});
  in.context = test::random_tensor(rng, Shape{2, 77, c.context_dim});
  const int64_t ids = 6;
  in.text_width = c.addition_embed_input_dim - ids * c.addition_time_embed_dim;
  in.text_embeds = test::random_tensor(rng, Shape{2, in.text_width});
  in.time_ids = OwnedTensor(Shape{2, ids}, DType::kF32);
  for (int64_t i = 0; i < 2 * ids; ++i) in.time_ids.ptr<float>()[i] = float(64 * (i % 3) + 8 * i);
  return in;
}

// A UNet over tensors held in a caller's memory (held_component: the PyTorch extension runs the engine on
// a pipeline's own weights) computes what the same UNet loaded from its file computes, bit for bit, and
// reads the caller's memory rather than a copy of it.
TEST(Unet, HeldWeightsGiveTheFilesModel) {
  const ModelSource model =
      ModelSource::open(std::string(HD_SOURCE_DIR) + "/tests/fixtures/models/tiny_sdxl");
  const ModelComponent& file = *model.component("unet");
  HeldCopies copies = held_copies(file);  // the caller's weights
  std::vector<OwnedTensor>& memory = copies.memory;
  const std::vector<std::pair<std::string, Tensor>>& views = copies.views;
  const ModelComponent held = held_component("unet", views, file.config_json);
  const Unet from_file = Unet::load(file), from_held = Unet::load(held);
  EXPECT_EQ(from_held.config().block_out_channels, from_file.config().block_out_channels);
  EXPECT_EQ(from_held.config().context_dim, from_file.config().context_dim);
  EXPECT_EQ(from_held.config().addition_time_embed_dim, from_file.config().addition_time_embed_dim);

  test::Rng rng;
  HD_SEED_TRACE(rng);
  const UnetConfig& c = from_file.config();
  const SdxlInputs in = random_sdxl_inputs(rng, c);
  const OwnedTensor &sample = in.sample, &context = in.context, &text_embeds = in.text_embeds, &time_ids = in.time_ids;
  const TextTimeConditioning added{text_embeds, time_ids};
  const OwnedTensor expected = from_file.forward(sample, 537.0f, context, &added);
  const OwnedTensor got = from_held.forward(sample, 537.0f, context, &added);
  ASSERT_EQ(got.view().shape, expected.view().shape);
  // The same model, not bit for bit the same sums: the file's attention projections run stacked as one
  // product (StackedLinear), the held ones a product each, which BLAS may block differently.
  EXPECT_LE(test::relative_l2(got, test::to_doubles(expected)), 1e-6);

  // Shared, not copied: a change to the caller's memory is what the held model computes with.
  for (size_t i = 0; i < views.size(); ++i) {
    if (views[i].first != "conv_out.bias") continue;
    for (int64_t j = 0; j < views[i].second.numel(); ++j) memory[i].ptr<float>()[j] += 1.0f;
  }
  const OwnedTensor shifted = from_held.forward(sample, 537.0f, context, &added);
  for (int64_t i = 0; i < shifted.view().numel(); ++i)
    ASSERT_NEAR(shifted.ptr<float>()[i], expected.ptr<float>()[i] + 1.0f, 1e-5f) << i;
}

// Held tensors under the original (LDM) names, as ComfyUI's models hold them, go through the same name
// table as a single file's: the tiny SDXL pipeline's single file, its UNet held by those names, computes
// what the file's UNet computes, bit for bit; and add_embedding's input handed over already joined (the
// original UNet's `y`) gives what the pooled embedding and the ids give.
TEST(Unet, HeldLdmNamesGiveTheSingleFilesModel) {
  const std::string folder = std::string(HD_SOURCE_DIR) + "/tests/fixtures/models/tiny_sdxl_pipeline";
  const std::string path = folder + ".safetensors";
  const ModelSource model = ModelSource::open(path, folder);  // the folder's config: the ids' width
  const Unet from_file = Unet::load(*model.component("unet"));

  // The file's UNet tensors by their LDM names, read into the caller's memory in the engine's layout.
  const SafetensorsFile file = SafetensorsFile::open(path);
  const std::string prefix = "model.diffusion_model.";
  ModelComponent raw;
  raw.name = "unet";
  for (const SafetensorsEntry& e : file.entries()) {
    if (e.name.starts_with(prefix)) raw.tensors.push_back({e.name.substr(prefix.size()), &file, &e});
  }
  std::sort(raw.tensors.begin(), raw.tensors.end(),
            [](const TensorRef& a, const TensorRef& b) { return a.name < b.name; });
  ASSERT_FALSE(raw.tensors.empty());
  const HeldCopies copies = held_copies(raw);
  const ModelComponent held =
      held_component("unet", copies.views, model.component("unet")->config_json, /*ldm_names=*/true);
  EXPECT_TRUE(held.mapped_from_ldm);
  const Unet from_held = Unet::load(held);

  test::Rng rng;
  HD_SEED_TRACE(rng);
  const UnetConfig& c = from_file.config();
  const SdxlInputs in = random_sdxl_inputs(rng, c);
  const OwnedTensor &sample = in.sample, &context = in.context, &text_embeds = in.text_embeds, &time_ids = in.time_ids;
  const TextTimeConditioning added{text_embeds, time_ids};
  const OwnedTensor expected = from_file.forward(sample, 537.0f, context, &added);
  const OwnedTensor got = from_held.forward(sample, 537.0f, context, &added);
  // The same model, not bit for bit the same sums: the file's attention projections run stacked as one
  // product (StackedLinear), the held ones a product each, which BLAS may block differently.
  EXPECT_LE(test::relative_l2(got, test::to_doubles(expected)), 1e-6);

  // y = [pooled embedding, sinusoid of each id (cos first, as diffusers' and LDM's)], written out here.
  const int64_t d = c.addition_time_embed_dim, half = d / 2, ids = time_ids.view().dim(1), text_width = in.text_width;
  OwnedTensor joined(Shape{2, c.addition_embed_input_dim}, DType::kF32);
  for (int64_t n = 0; n < 2; ++n) {
    float* row = joined.ptr<float>() + n * c.addition_embed_input_dim;
    for (int64_t j = 0; j < text_width; ++j) row[j] = text_embeds.ptr<float>()[n * text_width + j];
    for (int64_t i = 0; i < ids; ++i) {
      const double id = time_ids.ptr<float>()[n * ids + i];
      for (int64_t j = 0; j < half; ++j) {
        const double angle = id * std::exp(-std::log(10000.0) * double(j) / double(half));
        row[text_width + i * d + j] = float(std::cos(angle));
        row[text_width + i * d + half + j] = float(std::sin(angle));
      }
    }
  }
  const TextTimeConditioning given_joined{joined, Tensor{}};
  ASSERT_TRUE(given_joined.joined());
  const OwnedTensor from_y = from_held.forward(sample, 537.0f, context, &given_joined);
  const std::vector<float> e = test::to_vector(expected);
  EXPECT_LT(test::relative_l2(test::to_vector(from_y), std::vector<double>(e.begin(), e.end())), 1e-5);
  // A joined embedding of the wrong width is refused, naming what it must be.
  const OwnedTensor narrow = test::random_tensor(rng, Shape{2, c.addition_embed_input_dim - 1});
  const TextTimeConditioning wrong{narrow, Tensor{}};
  EXPECT_THROW(
      {
        try {
          from_held.forward(sample, 537.0f, context, &wrong);
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("joined text-time embedding"), std::string::npos) << e.what();
          throw;
        }
      },
      Error);
}

}  // namespace
}  // namespace hd
