// GPU GroupNorm(+SiLU) and LayerNorm against the CPU reference on fresh random data, in f32, f16 and
// bf16, on SD's shapes and on awkward ones (2 channels a group, channel counts that are not multiples
// of 8, a large mean that would cancel a naive variance).
#include <gtest/gtest.h>

#include <cmath>
#include <utility>
#include <vector>

#include "core/error.h"
#include "ops/gpu/gpu_ops.h"
#include "ops/gpu/gpu_test_util.h"
#include "ops/gpu/group_norm_resident.h"
#include "ops/ops.h"
#include "test_util.h"

namespace hd {
namespace {

double tolerance(DType t) { return t == DType::kF32 ? 1e-5 : t == DType::kF16 ? 1.5e-3 : 1e-2; }

OwnedTensor random_with_mean(test::Rng& rng, Shape shape, float mean, float stddev) {
  auto t = test::random_tensor(rng, shape, stddev);
  for (int64_t i = 0; i < t.view().numel(); ++i) t.ptr<float>()[i] += mean;
  return t;
}

// GroupNorm's inputs on the host (f32): x with the given mean and a spread of 2, gamma near 1, beta near 0.
struct NormInputs {
  OwnedTensor x, gamma, beta;
};
NormInputs random_norm_inputs(test::Rng& rng, const Shape& shape, float mean) {
  const int64_t channels = shape[shape.rank() - 1];
  auto x = random_with_mean(rng, shape, mean, 2.f);
  auto gamma = random_with_mean(rng, Shape{channels}, 1.f, 0.3f);
  return {std::move(x), std::move(gamma), test::random_tensor(rng, Shape{channels}, 0.3f)};
}

TEST(GpuGroupNorm, MatchesCpu) {
  struct Case {
    Shape shape;
    int groups;
    float mean;
  };
  const Case cases[] = {
      {Shape{2, 16, 16, 320}, 32, 0.f},    // 10 channels a group, as SD1.5's first level
      {Shape{1, 8, 8, 64}, 32, 0.5f},      // 2 channels a group
      {Shape{2, 7, 5, 96}, 32, -1.f},      // odd sizes
      {Shape{1, 3, 3, 30}, 3, 0.f},        // C % 8 != 0: the scalar path
      {Shape{1, 32, 32, 128}, 32, 100.f},  // a mean far above the spread
      {Shape{2, 77, 40}, 8, 0.f},          // any rank: [N, L, C]
      {Shape{2, 64, 64, 320}, 32, 0.3f},   // SD1.5's first level: many slices a sample
      {Shape{1, 6, 5, 2048}, 32, 0.f},     // the widest the 16-byte path takes (256 columns)
      {Shape{1030, 2, 2, 16}, 4, 0.f},     // more samples than one launch counts (1024)
      {Shape{1, 96, 184, 512}, 32, 0.5f},  // past 16 MiB in 16 bits: the apply pass's streaming accesses
  };
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (const auto& c : cases) {
      for (bool silu : {false, true}) {
        SCOPED_TRACE(testing::Message() << dtype_name(t) << " " << c.shape.to_string() << " groups " << c.groups
                                        << (silu ? " +silu" : ""));
        test::Rng rng;
        HD_SEED_TRACE(rng);
        const auto [x, gamma, beta] = random_norm_inputs(rng, c.shape, c.mean);
        const auto out = test::poisoned_gpu(c.shape, t);
        ops::group_norm(test::to_gpu(x, t), test::to_gpu(gamma, t), test::to_gpu(beta, t), c.groups, 1e-5f, silu, out);
        OwnedTensor expected(c.shape, DType::kF32);
        ops::group_norm(test::rounded_to(x, t), test::rounded_to(gamma, t), test::rounded_to(beta, t), c.groups, 1e-5f,
                        silu, expected);
        EXPECT_LE(test::relative_l2(test::to_host_f32(out), test::reference_of(expected)), tolerance(t));
      }
    }
  }
}

// Each kernel path forced on the shapes the register-held paths take (SD's 8x8 to 64x64 levels: 1, 2
// and 4 groups to a 40-channel chunk; 30 channels a group: 4 to a 120-channel chunk; 2 and 4 channels a
// group; one pixel a sample; a mean far above the spread; the most vectors a block holds; slices whose
// last is shorter; SD1.5's own shapes on its step's launches), against the CPU. Where a path does not take a
// tensor (groups of 3 channels; a sample's chunk past one block for the one-kernel path), it is refused.
TEST(GpuGroupNorm, EachPathMatchesCpu) {
  struct Case {
    Shape shape;
    int groups;
    float mean;
    bool one_kernel, slices;  // whether each path takes it
  };
  const Case cases[] = {
      {Shape{2, 8, 8, 1280}, 32, 0.f, true, true},
      {Shape{2, 8, 8, 2560}, 32, 0.1f, true, true},
      {Shape{2, 16, 16, 1280}, 32, 0.2f, true, true},
      {Shape{2, 32, 32, 640}, 32, 0.f, true, true},
      {Shape{2, 32, 32, 320}, 32, -0.5f, true, true},
      {Shape{2, 16, 16, 960}, 32, 0.f, true, true},
      {Shape{1, 8, 8, 64}, 32, 0.5f, true, true},
      {Shape{1, 5, 3, 128}, 32, 0.f, true, true},
      {Shape{3, 1, 1, 16}, 4, 0.f, true, true},
      {Shape{1, 32, 32, 128}, 32, 100.f, true, true},
      {Shape{1, 48, 32, 32}, 8, 0.f, true, true},
      {Shape{1, 37, 29, 64}, 32, 0.f, true, true},
      {Shape{2, 64, 64, 320}, 32, 0.f, false, true},
      {Shape{2, 32, 32, 960}, 32, 0.3f, false, true},
      {Shape{1, 96, 80, 512}, 32, -2.f, false, true},
      {Shape{2, 7, 5, 96}, 32, -1.f, false, false},
      // SD1.5's own shapes on the launches its step takes: slices of 8 vectors a thread in 2 groups
      // (64x64x640), of 4 in 1 and 2 groups (32x32x1280, 32x32x1920); one kernel at 4 and 8 in 1 group.
      {Shape{2, 64, 64, 640}, 32, 0.f, false, true},
      {Shape{2, 32, 32, 1280}, 32, 0.1f, true, true},
      {Shape{2, 32, 32, 1920}, 32, 0.f, false, true},
      {Shape{2, 16, 16, 2560}, 32, -0.2f, true, true},
  };
  using gpu::GroupNormPath;
  for (DType t : {DType::kF16, DType::kBF16}) {
    for (const auto& c : cases) {
      for (GroupNormPath path : {GroupNormPath::kTwoPass, GroupNormPath::kResident, GroupNormPath::kSlices}) {
        SCOPED_TRACE(testing::Message() << dtype_name(t) << " " << c.shape.to_string() << " groups "
                                        << c.groups << " path " << int(path));
        test::Rng rng;
        HD_SEED_TRACE(rng);
        const auto [x, gamma, beta] = random_norm_inputs(rng, c.shape, c.mean);
        const auto x_gpu = test::to_gpu(x, t), gamma_gpu = test::to_gpu(gamma, t),
                   beta_gpu = test::to_gpu(beta, t);
        const auto out = test::poisoned_gpu(c.shape, t);
        const bool takes = path == GroupNormPath::kTwoPass ||
                           (path == GroupNormPath::kResident && c.one_kernel) ||
                           (path == GroupNormPath::kSlices && c.slices);
        if (!takes) {
          try {
            gpu::group_norm(x_gpu, gamma_gpu, beta_gpu, c.groups, 1e-5f, true, out, nullptr, path);
            ADD_FAILURE() << "a path took a tensor it does not fit";
          } catch (const Error& e) {
            EXPECT_EQ(e.kind(), ErrorKind::kUnsupported) << e.what();
          }
          continue;
        }
        gpu::group_norm(x_gpu, gamma_gpu, beta_gpu, c.groups, 1e-5f, true, out, nullptr, path);
        OwnedTensor expected(c.shape, DType::kF32);
        ops::group_norm(test::rounded_to(x, t), test::rounded_to(gamma, t), test::rounded_to(beta, t),
                        c.groups, 1e-5f, true, expected);
        EXPECT_LE(test::relative_l2(test::to_host_f32(out), test::reference_of(expected)), tolerance(t));
      }
    }
  }
}

// A channel offset [N, C] (a ResNet block's timestep embedding) normalised with x, on every path that
// takes the shape, against the CPU's x + offset. The register-held paths round x + offset to x's type
// (as a separate addition would), so their offsets stay near the spread; offsets fifty times x's
// spread run the two passes (16-byte and scalar), whose shifts must follow each channel's offset.
TEST(GpuGroupNorm, AddsAChannelOffsetOnEveryPath) {
  using gpu::GroupNormPath;
  struct Case {
    Shape shape;
    int groups;
    float offset_mean;
    std::vector<GroupNormPath> paths;
  };
  const std::vector<GroupNormPath> all = {GroupNormPath::kTwoPass, GroupNormPath::kResident,
                                          GroupNormPath::kSlices};
  const std::vector<GroupNormPath> two_pass = {GroupNormPath::kTwoPass};
  const Case cases[] = {
      {Shape{2, 8, 8, 1280}, 32, 0.5f, all},    // SD's 8x8 level
      {Shape{2, 32, 32, 320}, 32, -0.5f, all},  // 4 groups to a 40-channel chunk
      {Shape{1, 37, 29, 64}, 32, 0.f, all},     // slices whose last is shorter
      {Shape{2, 64, 64, 320}, 32, 0.3f, {GroupNormPath::kTwoPass, GroupNormPath::kSlices}},
      {Shape{2, 16, 16, 320}, 32, 100.f, two_pass},  // offsets far above the spread
      {Shape{2, 7, 5, 96}, 32, 100.f, two_pass},     // 3 channels a group: the 16-byte two passes only
      {Shape{1, 3, 3, 30}, 3, 100.f, two_pass},      // C % 8 != 0: the scalar two passes
  };
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (const auto& c : cases) {
      for (GroupNormPath path : c.paths) {
        if (t == DType::kF32 && path != GroupNormPath::kTwoPass) continue;  // 16-bit types only
        SCOPED_TRACE(testing::Message() << dtype_name(t) << " " << c.shape.to_string() << " groups "
                                        << c.groups << " offsets " << c.offset_mean << " path " << int(path));
        test::Rng rng;
        HD_SEED_TRACE(rng);
        const auto [x, gamma, beta] = random_norm_inputs(rng, c.shape, 0.f);
        const auto offset =
            random_with_mean(rng, Shape{c.shape[0], c.shape[c.shape.rank() - 1]}, c.offset_mean, 1.f);
        const auto out = test::poisoned_gpu(c.shape, t);
        const auto offset_gpu = test::to_gpu(offset, t);
        gpu::group_norm(test::to_gpu(x, t), test::to_gpu(gamma, t), test::to_gpu(beta, t), c.groups, 1e-5f,
                        true, out, &offset_gpu.view(), path);
        OwnedTensor expected(c.shape, DType::kF32);
        const auto offset_host = test::rounded_to(offset, t);
        ops::group_norm(test::rounded_to(x, t), test::rounded_to(gamma, t), test::rounded_to(beta, t),
                        c.groups, 1e-5f, true, expected, &offset_host.view());
        EXPECT_LE(test::relative_l2(test::to_host_f32(out), test::reference_of(expected)), tolerance(t));
      }
    }
  }
}

// An offset whose data is not 16-byte aligned (a dense view one element into its buffer): the automatic
// choice reads it on the two passes, and a forced register-held path refuses it.
TEST(GpuGroupNorm, AChannelOffsetOffSixteenBytesTakesTheTwoPasses) {
  using gpu::GroupNormPath;
  test::Rng rng;
  HD_SEED_TRACE(rng);
  const Shape shape{2, 16, 16, 320};
  const auto [x, gamma, beta] = random_norm_inputs(rng, shape, 0.f);
  auto padded = test::random_tensor(rng, Shape{2 * 320 + 1}, 1.f);
  const auto padded_gpu = test::to_gpu(padded, DType::kF16);
  const Tensor offset_gpu = padded_gpu.view().slice(0, 1, 2 * 320).reshape(Shape{2, 320});
  const auto x_gpu = test::to_gpu(x, DType::kF16), gamma_gpu = test::to_gpu(gamma, DType::kF16),
             beta_gpu = test::to_gpu(beta, DType::kF16);
  const auto out = test::poisoned_gpu(shape, DType::kF16);
  ops::group_norm(x_gpu, gamma_gpu, beta_gpu, 32, 1e-5f, true, out, &offset_gpu);
  const auto offset_host = test::rounded_to(padded, DType::kF16);
  const Tensor offset = offset_host.view().slice(0, 1, 2 * 320).reshape(Shape{2, 320});
  OwnedTensor expected(shape, DType::kF32);
  ops::group_norm(test::rounded_to(x, DType::kF16), test::rounded_to(gamma, DType::kF16),
                  test::rounded_to(beta, DType::kF16), 32, 1e-5f, true, expected, &offset);
  EXPECT_LE(test::relative_l2(test::to_host_f32(out), test::reference_of(expected)), tolerance(DType::kF16));
  for (GroupNormPath path : {GroupNormPath::kResident, GroupNormPath::kSlices}) {
    try {
      gpu::group_norm(x_gpu, gamma_gpu, beta_gpu, 32, 1e-5f, true, out, &offset_gpu, path);
      ADD_FAILURE() << "path " << int(path) << " took an offset off 16 bytes";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kUnsupported) << e.what();
    }
  }
}

// What kAuto runs: one kernel for small slices, slices up to 12 MiB, two passes beyond and for what the
// register-held kernels do not take (f32, groups of 3 channels).
TEST(GpuGroupNorm, ChoosesThePathByShape) {
  using gpu::GroupNormPath;
  struct Case {
    Shape shape;
    DType dtype;
    GroupNormPath path;
  };
  const Case cases[] = {
      {Shape{2, 8, 8, 1280}, DType::kF16, GroupNormPath::kResident},
      {Shape{2, 16, 16, 1280}, DType::kBF16, GroupNormPath::kResident},
      {Shape{2, 16, 16, 1920}, DType::kF16, GroupNormPath::kSlices},  // 30720 values a block
      {Shape{2, 64, 64, 320}, DType::kF16, GroupNormPath::kSlices},
      {Shape{2, 64, 64, 640}, DType::kF16, GroupNormPath::kSlices},     // 10 MiB
      {Shape{2, 64, 64, 960}, DType::kF16, GroupNormPath::kTwoPass},    // 15 MiB
      {Shape{1, 128, 128, 512}, DType::kF16, GroupNormPath::kTwoPass},  // 16 MiB
      {Shape{2, 128, 128, 320}, DType::kF16, GroupNormPath::kTwoPass},  // 20 MiB
      {Shape{2, 8, 8, 1280}, DType::kF32, GroupNormPath::kTwoPass},
      {Shape{2, 7, 5, 96}, DType::kF16, GroupNormPath::kTwoPass},  // 3 channels a group
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(testing::Message() << dtype_name(c.dtype) << " " << c.shape.to_string());
    const int64_t channels = c.shape[c.shape.rank() - 1];
    const auto x = test::poisoned_gpu(c.shape, c.dtype), out = test::poisoned_gpu(c.shape, c.dtype);
    const auto gamma = test::poisoned_gpu(Shape{channels}, c.dtype);
    const auto beta = test::poisoned_gpu(Shape{channels}, c.dtype);
    EXPECT_EQ(int(gpu::group_norm_path_for(x, gamma, beta, 32, out)), int(c.path));
  }
}

// The sums are added in a fixed order (no float atomics), so a captured UNet replays its plain forward
// bit for bit; and the per-sample counters the statistics kernel leaves behind must not leak into the
// next call.
TEST(GpuGroupNorm, RepeatsItselfBitForBit) {
  test::Rng rng;
  HD_SEED_TRACE(rng);
  const Shape shape{2, 32, 32, 640};
  const auto x = test::to_gpu(random_with_mean(rng, shape, 0.2f, 1.f), DType::kF16);
  const auto gamma = test::to_gpu(random_with_mean(rng, Shape{640}, 1.f, 0.3f), DType::kF16);
  const auto beta = test::to_gpu(test::random_tensor(rng, Shape{640}, 0.3f), DType::kF16);
  for (gpu::GroupNormPath path :
       {gpu::GroupNormPath::kTwoPass, gpu::GroupNormPath::kResident, gpu::GroupNormPath::kSlices}) {
    const auto first = test::poisoned_gpu(shape, DType::kF16),
               second = test::poisoned_gpu(shape, DType::kF16);
    gpu::group_norm(x, gamma, beta, 32, 1e-5f, true, first, nullptr, path);
    for (int i = 0; i < 5; ++i) gpu::group_norm(x, gamma, beta, 32, 1e-5f, true, second, nullptr, path);
    EXPECT_EQ(test::to_vector(test::to_host_f32(first)), test::to_vector(test::to_host_f32(second)));
  }
}

// group_statistics on a tile's core inside its halo (strided rows and samples), on the 16-byte path and
// the scalar one, against the CPU's double sums; then the parts combined and applied against the CPU.
TEST(GpuGroupStatistics, OfStridedViewsMatchCpuAndPartsApplyAsTheWhole) {
  struct Case {
    Shape shape;  // the extent; the core leaves `border` pixels on every side
    int groups;
    int64_t border;
    float mean;
  };
  const Case cases[] = {
      {Shape{2, 20, 24, 128}, 32, 3, 0.f},    // the VAE's top level, 16-byte loads
      {Shape{1, 13, 9, 512}, 32, 2, 40.f},    // a mean far above the spread
      {Shape{1, 10, 10, 30}, 3, 1, 0.f},      // C % 8 != 0: the scalar path
      {Shape{1, 6, 7, 2048}, 32, 1, -1.f},    // the widest 16-byte case
      {Shape{3, 9, 9, 64}, 8, 0, 0.5f},       // the whole view
  };
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (const auto& c : cases) {
      SCOPED_TRACE(testing::Message() << dtype_name(t) << " " << c.shape.to_string() << " border " << c.border);
      test::Rng rng;
      HD_SEED_TRACE(rng);
      const int64_t channels = c.shape[3], b = c.border;
      const auto x = random_with_mean(rng, c.shape, c.mean, 2.f);
      const OwnedTensor on_gpu = test::to_gpu(x, t), rounded = test::rounded_to(x, t);
      const auto core = [&](const Tensor& v) {
        return v.slice(1, b, v.dim(1) - 2 * b).slice(2, b, v.dim(2) - 2 * b);
      };
      const Shape stats_shape{c.shape[0], c.groups, 2};
      const auto stats = test::poisoned_gpu(stats_shape, DType::kF32);
      ops::group_statistics(core(on_gpu.view()), c.groups, stats);
      OwnedTensor expected(stats_shape, DType::kF32);
      ops::group_statistics(core(rounded.view()), c.groups, expected);
      const OwnedTensor got = test::to_host_f32(stats);
      for (int64_t i = 0; i < stats_shape.numel(); i += 2) {
        EXPECT_NEAR(got.ptr<float>()[i], expected.ptr<float>()[i], 1e-5 * (1.0 + std::abs(expected.ptr<float>()[i])));
        EXPECT_NEAR(got.ptr<float>()[i + 1], expected.ptr<float>()[i + 1], 1e-4 * expected.ptr<float>()[i + 1]);
      }
      // The core's statistics as one part, applied on the GPU to the whole view, against the CPU.
      const auto gamma = random_with_mean(rng, Shape{channels}, 1.f, 0.3f);
      const auto beta = test::random_tensor(rng, Shape{channels}, 0.3f);
      const int64_t core_pixels = (c.shape[1] - 2 * b) * (c.shape[2] - 2 * b);
      const OwnedTensor affine = ops::group_norm_affine(expected.view().reshape(Shape{1, c.shape[0], c.groups, 2}),
                                                        {core_pixels}, gamma, beta, 1e-5f);
      OwnedTensor affine_gpu(affine.view().shape, DType::kF32, test::gpu0());
      ops::copy(affine, affine_gpu);
      const auto out = test::poisoned_gpu(c.shape, t);
      ops::group_norm_apply(on_gpu, affine_gpu, /*fuse_silu=*/true, out);
      OwnedTensor reference(c.shape, DType::kF32);
      ops::group_norm_apply(rounded, affine, true, reference);
      EXPECT_LE(test::relative_l2(test::to_host_f32(out), test::reference_of(reference)), tolerance(t));
    }
  }
}

// Parts' statistics combined on the GPU (an image split's strips, all-gathered) against the CPU's
// combination, with gamma and beta in each dtype; with strips of several sizes.
TEST(GpuGroupNormCombine, MatchesCpu) {
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16}) {
    SCOPED_TRACE(dtype_name(t));
    test::Rng rng;
    HD_SEED_TRACE(rng);
    const int64_t parts = 4, n = 2, groups = 8, channels = 64;
    OwnedTensor stats(Shape{parts, n, groups, 2}, DType::kF32);
    for (int64_t i = 0; i < stats.view().numel(); i += 2) {
      stats.ptr<float>()[i] = 20.f + float(rng.normal());
      stats.ptr<float>()[i + 1] = 50.f + 10.f * std::abs(float(rng.normal()));
    }
    const std::vector<int64_t> pixels{96, 96, 64, 32};
    const auto gamma = random_with_mean(rng, Shape{channels}, 1.f, 0.3f);
    const auto beta = test::random_tensor(rng, Shape{channels}, 0.3f);
    OwnedTensor stats_gpu(stats.view().shape, DType::kF32, test::gpu0());
    ops::copy(stats, stats_gpu);
    const auto affine = test::poisoned_gpu(Shape{n, channels, 2}, DType::kF32);
    ops::group_norm_combine(stats_gpu, pixels, test::to_gpu(gamma, t), test::to_gpu(beta, t), 1e-5f, affine);
    const OwnedTensor expected =
        ops::group_norm_affine(stats, pixels, test::rounded_to(gamma, t), test::rounded_to(beta, t), 1e-5f);
    EXPECT_LE(test::relative_l2(test::to_host_f32(affine), test::reference_of(expected)), 1e-6);
  }
}

TEST(GpuLayerNorm, MatchesCpu) {
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16}) {
    // 16-byte path up to 2048 channels (held in registers), one element a lane beyond and for odd widths.
    for (const Shape& shape : {Shape{2, 77, 768}, Shape{3, 5, 40}, Shape{1, 4096, 320}, Shape{7, 1}, Shape{2, 3, 2048},
                               Shape{1, 2, 2056}, Shape{4, 1, 36}}) {
      SCOPED_TRACE(testing::Message() << dtype_name(t) << " " << shape.to_string());
      test::Rng rng;
      HD_SEED_TRACE(rng);
      const int64_t channels = shape[shape.rank() - 1];
      const auto x = random_with_mean(rng, shape, 3.f, 1.5f);
      const auto gamma = random_with_mean(rng, Shape{channels}, 1.f, 0.3f);
      const auto beta = test::random_tensor(rng, Shape{channels}, 0.3f);
      const auto out = test::poisoned_gpu(shape, t);
      ops::layer_norm(test::to_gpu(x, t), test::to_gpu(gamma, t), test::to_gpu(beta, t), 1e-5f, out);
      OwnedTensor expected(shape, DType::kF32);
      ops::layer_norm(test::rounded_to(x, t), test::rounded_to(gamma, t), test::rounded_to(beta, t), 1e-5f, expected);
      EXPECT_LE(test::relative_l2(test::to_host_f32(out), test::reference_of(expected)), tolerance(t));
    }
  }
}

}  // namespace
}  // namespace hd
