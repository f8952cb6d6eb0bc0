// GPU nearest 2x upsampling, channel concatenation, copies between views and zero fills against the
// CPU: exact, in every dtype (the kernels move bits).
#include <gtest/gtest.h>

#include <functional>
#include <utility>

#include "ops/gpu/gpu_test_util.h"
#include "ops/ops.h"
#include "test_util.h"

namespace hd {
namespace {

TEST(GpuLayout, UpsampleAndConcatAreExact) {
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16}) {
    SCOPED_TRACE(dtype_name(t));
    test::Rng rng;
    HD_SEED_TRACE(rng);
    const auto x = test::random_tensor(rng, Shape{2, 5, 3, 12});
    const auto up = test::poisoned_gpu(Shape{2, 10, 6, 12}, t);
    ops::upsample_nearest_2x(test::to_gpu(x, t), up);
    OwnedTensor expected_up(Shape{2, 10, 6, 12}, DType::kF32);
    ops::upsample_nearest_2x(test::rounded_to(x, t), expected_up);
    EXPECT_EQ(test::relative_l2(test::to_host_f32(up), test::reference_of(expected_up)), 0.0);

    const auto b = test::random_tensor(rng, Shape{2, 5, 3, 7});
    const auto cat = test::poisoned_gpu(Shape{2, 5, 3, 19}, t);
    ops::concat_channels(test::to_gpu(x, t), test::to_gpu(b, t), cat);
    OwnedTensor expected_cat(Shape{2, 5, 3, 19}, DType::kF32);
    ops::concat_channels(test::rounded_to(x, t), test::rounded_to(b, t), expected_cat);
    EXPECT_EQ(test::relative_l2(test::to_host_f32(cat), test::reference_of(expected_cat)), 0.0);
  }
}

// The image split's copies: a strip of rows of a batch, the inside of a padded buffer, and two leading
// dimensions swapped, on the device against the same copies on the host.
TEST(GpuLayout, CopiesBetweenViewsAndZeroFillsAreExact) {
  for (DType t : {DType::kF32, DType::kF16}) {
    SCOPED_TRACE(dtype_name(t));
    test::Rng rng;
    HD_SEED_TRACE(rng);
    const auto x = test::random_tensor(rng, Shape{3, 8, 5, 6});
    const OwnedTensor on_gpu = test::to_gpu(x, t), rounded = test::rounded_to(x, t);
    const auto check = [&](const std::function<Tensor(const Tensor&)>& src_view, Shape dst_shape,
                           const std::function<Tensor(const Tensor&)>& dst_view) {
      const auto got = test::poisoned_gpu(dst_shape, t);
      ops::fill_zeros(got);
      ops::copy(src_view(on_gpu), dst_view(got));
      OwnedTensor expected(dst_shape, DType::kF32);
      ops::fill_zeros(expected);
      ops::copy(src_view(rounded), dst_view(expected));
      EXPECT_EQ(test::relative_l2(test::to_host_f32(got), test::reference_of(expected)), 0.0);
    };
    const auto whole = [](const Tensor& v) { return v; };
    check([](const Tensor& v) { return v.slice(1, 2, 4); }, Shape{3, 4, 5, 6}, whole);
    check(whole, Shape{3, 10, 7, 6}, [](const Tensor& v) { return v.slice(1, 1, 8).slice(2, 1, 5); });
    check([](const Tensor& v) {
      Tensor swapped = v.reshape(Shape{3, 8, 30});
      std::swap(swapped.shape[0], swapped.shape[1]);
      std::swap(swapped.strides[0], swapped.strides[1]);
      return swapped;
    }, Shape{8, 3, 30}, whole);
  }
  // A strip surrounded by the rows of its neighbours (rows of a gathered [N, 2, W, C], strided samples),
  // or by zeros; channels of 16-byte words and of 2-byte ones.
  for (const Shape& shape : {Shape{2, 3, 4, 8}, Shape{2, 3, 4, 3}}) {
    SCOPED_TRACE(shape.to_string());
    test::Rng rng;
    const auto x = test::random_tensor(rng, shape);
    const auto edges = test::random_tensor(rng, Shape{shape[0], 2, shape[2], shape[3]});
    const OwnedTensor x_gpu = test::to_gpu(x, DType::kF16), edges_gpu = test::to_gpu(edges, DType::kF16);
    const OwnedTensor x_host = test::rounded_to(x, DType::kF16), edges_host = test::rounded_to(edges, DType::kF16);
    const Shape padded{shape[0], shape[1] + 2, shape[2] + 2, shape[3]};
    for (bool top : {false, true}) {
      const auto out = test::poisoned_gpu(padded, DType::kF16);
      const Tensor above_gpu = edges_gpu.view().slice(1, 1, 1), below_gpu = edges_gpu.view().slice(1, 0, 1);
      ops::surround_strip(x_gpu, top ? &above_gpu : nullptr, &below_gpu, out);
      OwnedTensor expected(padded, DType::kF32);
      const Tensor above = edges_host.view().slice(1, 1, 1), below = edges_host.view().slice(1, 0, 1);
      ops::surround_strip(x_host, top ? &above : nullptr, &below, expected);
      EXPECT_EQ(test::relative_l2(test::to_host_f32(out), test::reference_of(expected)), 0.0);
    }
  }
  const auto a = test::poisoned_gpu(Shape{2, 3}, DType::kF16);
  OwnedTensor host(Shape{2, 6}, DType::kF16);
  test::expect_error_containing([&] { ops::copy(host.view().slice(1, 0, 3), a); }, "only dense tensors move");
}

}  // namespace
}  // namespace hd
