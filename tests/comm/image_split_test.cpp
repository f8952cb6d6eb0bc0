// The exact image split's exchanges at 2 and 4 ranks of an in-process group: each rank's strip of a
// convolution, a GroupNorm and a gather equals the same rows of the whole image's, computed by the plain op.
#include "comm/image_split.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "comm/in_process_group.h"
#include "comm/rank_threads.h"
#include "comm/strip_ranks.h"
#include "ops/ops.h"
#include "test_util.h"

namespace hd::comm {
namespace {

using test::on_strips;
using test::rows_of;

std::vector<double> as_reference(const Tensor& t) {
  const std::vector<float> v = test::to_vector(t);
  return {v.begin(), v.end()};
}

TEST(ImageSplit, ConvolutionOfEachStripIsTheWholeImagesRows) {
  test::Rng rng;
  HD_SEED_TRACE(rng);
  const OwnedTensor x = test::random_tensor(rng, Shape{2, 8, 6, 5});
  const OwnedTensor w = test::random_tensor(rng, Shape{7, 3, 3, 5}, 0.3f);
  const OwnedTensor bias = test::random_tensor(rng, Shape{7});
  for (int stride : {1, 2}) {
    const ops::Conv2dParams p{stride, 1, 0};
    OwnedTensor whole(ops::conv2d_output_shape(x.view().shape, w.view().shape, p), DType::kF32);
    const OwnedTensor residual = test::random_tensor(rng, whole.view().shape);
    ops::conv2d(x, w, &bias.view(), &residual.view(), p, whole);
    for (int ranks : {2, 4}) {
      SCOPED_TRACE(testing::Message() << "stride " << stride << ", " << ranks << " strips");
      const int64_t h = 8 / ranks, out_h = h / stride;
      on_strips(ranks, [&](int rank, ImageSplit& split) {
        const OwnedTensor strip = rows_of(x, rank * h, h), strip_residual = rows_of(residual, rank * out_h, out_h);
        OwnedTensor out = test::poisoned_tensor(Shape{2, out_h, whole.view().dim(2), 7});
        split.conv(strip, w, bias, stride, &strip_residual.view(), out);
        EXPECT_LE(test::max_abs_diff(out, as_reference(rows_of(whole, rank * out_h, out_h))), 1e-5);
      });
    }
  }
}

TEST(ImageSplit, PointwiseConvolutionExchangesNothing) {
  test::Rng rng;
  HD_SEED_TRACE(rng);
  const OwnedTensor x = test::random_tensor(rng, Shape{1, 4, 3, 4});
  const OwnedTensor w = test::random_tensor(rng, Shape{2, 1, 1, 4}), bias = test::random_tensor(rng, Shape{2});
  OwnedTensor whole(Shape{1, 4, 3, 2}, DType::kF32);
  ops::conv2d(x, w, &bias.view(), nullptr, {}, whole);
  on_strips(2, [&](int rank, ImageSplit& split) {
    OwnedTensor out = test::poisoned_tensor(Shape{1, 2, 3, 2});
    split.conv(rows_of(x, rank * 2, 2), w, bias, 1, nullptr, out);
    EXPECT_LE(test::max_abs_diff(out, as_reference(rows_of(whole, rank * 2, 2))), 1e-6);
    EXPECT_EQ(split.group().counts().collectives, 0u);
  });
}

TEST(ImageSplit, GroupNormUsesTheWholeImagesStatistics) {
  test::Rng rng;
  HD_SEED_TRACE(rng);
  // A large common offset: the strips' statistics must combine without cancelling the spread away.
  OwnedTensor x = test::random_tensor(rng, Shape{2, 8, 5, 12});
  for (int64_t i = 0; i < x.view().numel(); ++i) x.ptr<float>()[i] += 30.0f;
  const OwnedTensor gamma = test::random_tensor(rng, Shape{12}), beta = test::random_tensor(rng, Shape{12});
  for (bool silu : {false, true}) {
    OwnedTensor whole(x.view().shape, DType::kF32);
    ops::group_norm(x, gamma, beta, 4, 1e-5f, silu, whole);
    for (int ranks : {2, 4}) {
      SCOPED_TRACE(testing::Message() << (silu ? "silu, " : "") << ranks << " strips");
      const int64_t h = 8 / ranks;
      on_strips(ranks, [&](int rank, ImageSplit& split) {
        OwnedTensor out = test::poisoned_tensor(Shape{2, h, 5, 12});
        split.group_norm(rows_of(x, rank * h, h), gamma, beta, 4, 1e-5f, silu, out);
        EXPECT_LE(test::max_abs_diff(out, as_reference(rows_of(whole, rank * h, h))), 2e-5);
      });
    }
  }
}

TEST(ImageSplit, GatherPutsEachSamplesStripsInImageOrder) {
  test::Rng rng;
  HD_SEED_TRACE(rng);
  for (int64_t n : {1, 3}) {
    const OwnedTensor whole = test::random_tensor(rng, Shape{n, 12, 5});  // tokens [N, L, C]
    for (int ranks : {2, 4}) {
      SCOPED_TRACE(testing::Message() << n << " samples, " << ranks << " strips");
      const int64_t rows = 12 / ranks;
      on_strips(ranks, [&](int rank, ImageSplit& split) {
        const OwnedTensor gathered = split.gather_strips(rows_of(whole, rank * rows, rows));
        ASSERT_EQ(gathered.view().shape, whole.view().shape);
        EXPECT_EQ(test::max_abs_diff(gathered, as_reference(whole)), 0.0);
        EXPECT_EQ(split.group().counts().collectives, 1u);
      });
    }
  }
}

// Displaced: after an exact forward of image A, a forward of image B takes its own strip's rows of B and
// the other strips' of A, so each strip's convolution and GroupNorm are those of the image that is A with
// that strip's rows from B.
TEST(ImageSplit, DisplacedForwardsTakeTheOtherStripsValuesOfTheForwardBefore) {
  test::Rng rng;
  HD_SEED_TRACE(rng);
  const Shape shape{2, 8, 5, 4};
  const OwnedTensor a = test::random_tensor(rng, shape), b = test::random_tensor(rng, shape);
  const OwnedTensor w = test::random_tensor(rng, Shape{6, 3, 3, 4}, 0.3f), bias = test::random_tensor(rng, Shape{6});
  const OwnedTensor gamma = test::random_tensor(rng, Shape{6}), beta = test::random_tensor(rng, Shape{6});
  for (int ranks : {2, 4}) {
    SCOPED_TRACE(testing::Message() << ranks << " strips");
    const int64_t h = 8 / ranks;
    InProcessGroup group(ranks, std::chrono::seconds(60));
    std::vector<std::unique_ptr<Communicator>> comms;
    for (int r = 0; r < ranks; ++r) comms.push_back(group.communicator(r));
    run_ranks(ranks, [&](int rank) {
      ImageSplit split(*comms[size_t(rank)], /*keeps_sites=*/true);
      const auto forward = [&](const Tensor& image) {
        split.begin_forward(shape);
        OwnedTensor y(Shape{2, h, 5, 6}, DType::kF32), z(Shape{2, h, 5, 6}, DType::kF32);
        split.conv(rows_of(image, rank * h, h), w, bias, 1, nullptr, y);
        split.group_norm(y, gamma, beta, 3, 1e-5f, true, z);
        split.end_forward();
        return z;
      };
      (void)forward(a);
      split.set_displaced(true);
      const OwnedTensor got = forward(b);
      // The image as this strip saw it: A, with this strip's rows from B.
      OwnedTensor mixed(shape, DType::kF32);
      ops::copy(a, mixed);
      ops::copy(b.view().slice(1, rank * h, h), mixed.view().slice(1, rank * h, h));
      OwnedTensor y(Shape{2, 8, 5, 6}, DType::kF32), z(Shape{2, 8, 5, 6}, DType::kF32);
      ops::conv2d(mixed, w, &bias.view(), nullptr, {1, 1, 0}, y);
      // The GroupNorm's other strips are A's convolution; this strip's is its own.
      OwnedTensor a_conv(Shape{2, 8, 5, 6}, DType::kF32);
      ops::conv2d(a, w, &bias.view(), nullptr, {1, 1, 0}, a_conv);
      ops::copy(y.view().slice(1, rank * h, h), a_conv.view().slice(1, rank * h, h));
      ops::group_norm(a_conv, gamma, beta, 3, 1e-5f, true, z);
      EXPECT_LE(test::max_abs_diff(got, as_reference(rows_of(z, rank * h, h))), 2e-5);
      // A forward that exchanges otherwise than the one before is refused.
      split.begin_forward(shape);
      OwnedTensor narrow(Shape{2, h, 5, 6}, DType::kF32);
      test::expect_error_containing(
          [&] { split.group_norm(rows_of(a, rank * h, h), gamma, beta, 2, 1e-5f, false, narrow); },
          "a displaced run's forwards must have the same shapes");
    }, [&](int rank, const std::string& why) { group.fail(rank, why); });
  }
}

TEST(ImageSplit, RefusesWhatItCannotSplit) {
  test::Rng rng;
  const OwnedTensor x = test::random_tensor(rng, Shape{1, 3, 4, 2});
  const OwnedTensor five = test::random_tensor(rng, Shape{2, 5, 5, 2}), bias = test::random_tensor(rng, Shape{2});
  const OwnedTensor three = test::random_tensor(rng, Shape{2, 3, 3, 2});
  on_strips(2, [&](int, ImageSplit& split) {
    OwnedTensor out(Shape{1, 3, 4, 2}, DType::kF32);
    test::expect_error_containing([&] { split.conv(x, five, bias, 1, nullptr, out); }, "a 5x5 convolution");
    test::expect_error_containing([&] { split.conv(x, three, bias, 2, nullptr, out); },
                                  "a stride-2 convolution of a strip of 3 rows");
  });
}

}  // namespace
}  // namespace hd::comm
