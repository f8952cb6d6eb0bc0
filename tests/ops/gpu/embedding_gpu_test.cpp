// Token and timestep embeddings on the GPU against the CPU reference.
#include <gtest/gtest.h>

#include "core/error.h"
#include "ops/gpu/gpu_runtime.h"
#include "ops/gpu/gpu_test_util.h"
#include "ops/ops.h"
#include "test_util.h"

namespace hd {
namespace {

TEST(GpuEmbedding, CopiesTheRowsOfTheIdsAndRejectsIdsOutsideTheTable) {
  test::Rng rng;
  HD_SEED_TRACE(rng);
  const int64_t vocab = 50, width = 136;
  const auto table = test::random_tensor(rng, Shape{vocab, width});
  OwnedTensor ids(Shape{2, 9}, DType::kI32);
  for (int64_t i = 0; i < ids.view().numel(); ++i) ids.ptr<int32_t>()[i] = int32_t(rng.integer(0, vocab - 1));
  OwnedTensor dids(ids.view().shape, DType::kI32, test::gpu0());
  gpu::copy(ids, dids);
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16}) {
    const auto dtable = test::to_gpu(table, t);
    const auto dout = test::poisoned_gpu(Shape{2, 9, width}, t);
    ops::embedding(dids, dtable, dout);
    OwnedTensor expected(Shape{2, 9, width}, DType::kF32);
    ops::embedding(ids, test::rounded_to(table, t), expected);
    EXPECT_EQ(test::relative_l2(test::to_host_f32(dout), test::reference_of(expected)), 0.0) << dtype_name(t);
  }
  ids.ptr<int32_t>()[7] = int32_t(vocab);  // one past the table
  gpu::copy(ids, dids);
  const auto dtable = test::to_gpu(table, DType::kF16);
  try {
    ops::embedding(dids, dtable, test::poisoned_gpu(Shape{2, 9, width}, DType::kF16));
    ADD_FAILURE() << "an id outside the table was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("token id 50 at position 7"), std::string::npos) << e.what();
  }
}

TEST(GpuTimestepEmbedding, MatchesCpu) {
  OwnedTensor t(Shape{3}, DType::kF32);
  const float steps[] = {999.0f, 500.5f, 1.0f};
  std::copy(std::begin(steps), std::end(steps), t.ptr<float>());
  OwnedTensor dt(Shape{3}, DType::kF32, test::gpu0());
  gpu::copy(t, dt);
  for (int64_t dim : {320, 257}) {
    for (const ops::TimestepEmbeddingParams p : {ops::TimestepEmbeddingParams{}, ops::TimestepEmbeddingParams{false, 1.0f, 10000.0f, 2.0f}}) {
      OwnedTensor expected(Shape{3, dim}, DType::kF32);
      ops::timestep_embedding(t, p, expected);
      const auto d32 = test::poisoned_gpu(Shape{3, dim}, DType::kF32);
      ops::timestep_embedding(dt, p, d32);
      // Arguments reach ~1000 rad, where one f32 ulp is 6.1e-5: exp() on two processors may differ by an
      // ulp, which moves sin/cos by up to that much. 1e-4 bounds it; a wrong formula is off by O(1).
      EXPECT_LE(test::relative_l2(test::to_host_f32(d32), test::reference_of(expected)), 1e-4) << dim;
      const auto d16 = test::poisoned_gpu(Shape{3, dim}, DType::kF16);
      ops::timestep_embedding(dt, p, d16);
      EXPECT_LE(test::relative_l2(test::to_host_f32(d16), test::reference_of(expected)), 1e-3) << dim;
    }
  }
}

}  // namespace
}  // namespace hd
