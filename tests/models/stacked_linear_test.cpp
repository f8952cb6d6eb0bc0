#include "models/stacked_linear.h"

#include <gtest/gtest.h>

#include <cstring>

#include "io/model_source.h"
#include "io/safetensors.h"
#include "ops/ops.h"
#include "test_util.h"

namespace hd {
namespace {

constexpr int64_t kOut = 6, kIn = 5;
const std::vector<std::string> kNames = {"attn.to_q", "attn.to_k", "attn.to_v"};

std::vector<uint8_t> bytes_of(const OwnedTensor& t) {
  std::vector<uint8_t> b(size_t(t.view().numel()) * sizeof(float));
  std::memcpy(b.data(), t.ptr<float>(), b.size());
  return b;
}

// From a file, the three weights are stacked into one, and one product gives each map's output as a
// column range of one tensor, equal to the map's own product.
TEST(StackedLinear, StacksFileWeightsIntoOneProduct) {
  test::Rng rng;
  HD_SEED_TRACE(rng);
  std::vector<OwnedTensor> weights;
  std::vector<SafetensorsWriteItem> items;
  for (const std::string& name : kNames) {
    weights.push_back(test::random_tensor(rng, Shape{kOut, kIn}));
    items.push_back({name + ".weight", "F32", {kOut, kIn}, bytes_of(weights.back())});
  }
  test::TempDir dir;
  dir.write("m/unet/diffusion_pytorch_model.safetensors", serialize_safetensors(items));
  const ModelSource m = ModelSource::open((dir.path() / "m").string());
  const WeightReader w(*m.component("unet"), "");
  const StackedLinear s = StackedLinear::load(w, kNames, kOut, kIn);
  ASSERT_EQ(s.parts(), 3u);
  EXPECT_EQ(static_cast<const char*>(s.weight(1).data),
            static_cast<const char*>(s.weight(0).data) + kOut * kIn * sizeof(float))
      << "one stacked weight";
  const auto x = test::random_tensor(rng, Shape{2, 7, kIn});
  const StackedLinear::Outputs out = s(x);
  ASSERT_EQ(out.storage.size(), 1u);
  EXPECT_EQ(out.storage[0].view().shape, (Shape{2, 7, 3 * kOut}));
  for (size_t i = 0; i < kNames.size(); ++i) {
    EXPECT_EQ(test::relative_l2(s.weight(i), test::to_doubles(weights[i])), 0.0) << kNames[i];
    OwnedTensor expected(Shape{2, 7, kOut}, DType::kF32);
    ops::linear(x, weights[i], nullptr, expected);
    EXPECT_EQ(out.parts[i].shape, (Shape{2, 7, kOut}));
    EXPECT_LE(test::relative_l2(out.parts[i], test::to_doubles(expected)), 1e-6) << kNames[i];
  }
}

// Weights a caller holds are not copied: each map keeps the caller's memory and runs its own product.
TEST(StackedLinear, KeepsHeldWeightsInTheCallersMemory) {
  test::Rng rng;
  HD_SEED_TRACE(rng);
  std::vector<OwnedTensor> weights;
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const std::string& name : kNames) {
    weights.push_back(test::random_tensor(rng, Shape{kOut, kIn}));
    tensors.push_back({name + ".weight", weights.back().view()});
  }
  const ModelComponent held = held_component("unet", tensors, std::nullopt);
  const WeightReader w(held, "");
  const StackedLinear s = StackedLinear::load(w, kNames, kOut, kIn);
  const auto x = test::random_tensor(rng, Shape{1, 4, kIn});
  const StackedLinear::Outputs out = s(x);
  EXPECT_EQ(out.storage.size(), 3u);
  for (size_t i = 0; i < kNames.size(); ++i) {
    EXPECT_EQ(s.weight(i).data, weights[i].view().data) << kNames[i];
    OwnedTensor expected(Shape{1, 4, kOut}, DType::kF32);
    ops::linear(x, weights[i], nullptr, expected);
    EXPECT_EQ(test::relative_l2(out.parts[i], test::to_doubles(expected)), 0.0) << kNames[i];
  }
}

}  // namespace
}  // namespace hd
