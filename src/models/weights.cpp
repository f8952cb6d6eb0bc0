#include "models/weights.h"

#include "core/error.h"

namespace hd {

nlohmann::json component_config(const ModelComponent& component) {
  if (!component.config_json) return nlohmann::json::object();
  auto j = nlohmann::json::parse(*component.config_json, nullptr, false);
  HD_CHECK(!j.is_discarded() && j.is_object(), component.name, "/config.json is not a JSON object");
  return j;
}

WeightReader::WeightReader(const ModelComponent& component, std::string prefix, ops::Placement placement)
    : component_(component), prefix_(std::move(prefix)), placement_(placement) {
  placement_.validate();
}

OwnedTensor WeightReader::placed(OwnedTensor host_f32) const {
  if (placement_.device.is_cpu() && placement_.dtype == DType::kF32) return host_f32;
  return ops::place(host_f32, placement_);
}

bool WeightReader::has(std::string_view name) const { return component_.find(prefix_ + std::string(name)) != nullptr; }

const TensorRef& WeightReader::find(std::string_view name) const {
  const std::string full = prefix_ + std::string(name);
  const TensorRef* t = component_.find(full);
  HD_CHECK(t != nullptr, component_.name, ": missing tensor '", component_.prefix, full, "'");
  return *t;
}

std::vector<int64_t> WeightReader::shape(std::string_view name) const { return find(name).shape(); }

OwnedTensor WeightReader::load(std::string_view name, const Shape& expected) const {
  const TensorRef& t = find(name);
  const std::vector<int64_t> stored = t.shape();
  Shape actual;
  const bool fits = stored.size() <= size_t(kMaxRank);
  for (size_t i = 0; fits && i < stored.size(); ++i) actual.push_back(stored[i]);
  HD_CHECK(fits && actual == expected, component_.name, ": tensor '", component_.prefix, prefix_, name, "'",
           component_.mapped_from_ldm ? " (mapped from the single file's names)" : "", " has shape ",
           fits ? actual.to_string() : "of rank > 6", ", expected ", expected.to_string());
  if (t.row_count > 0) return placed(t.file->load_rows(*t.entry, t.first_row, t.row_count, DType::kF32));  // one of OpenCLIP's fused q/k/v
  OwnedTensor stored_tensor = t.file->load(*t.entry, DType::kF32);
  if (!t.transposed) return placed(std::move(stored_tensor));
  HD_CHECK(expected.rank() == 2, component_.name, ": only a matrix can be stored transposed ('", name, "')");
  OwnedTensor flipped(expected, DType::kF32);
  const int64_t rows = expected[0], cols = expected[1];
  const float* src = stored_tensor.ptr<float>();  // [cols, rows]
  float* dst = flipped.ptr<float>();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) dst[r * cols + c] = src[c * rows + r];
  return placed(std::move(flipped));
}

OwnedTensor WeightReader::load_conv(std::string_view name, int64_t out, int64_t in, int64_t kh, int64_t kw) const {
  const OwnedTensor torch_layout = WeightReader(component_, prefix_).load(name, Shape{out, in, kh, kw});
  OwnedTensor nhwc(Shape{out, kh, kw, in}, DType::kF32);
  const float* src = torch_layout.ptr<float>();
  float* dst = nhwc.ptr<float>();
  for (int64_t o = 0; o < out; ++o)
    for (int64_t c = 0; c < in; ++c)
      for (int64_t y = 0; y < kh; ++y)
        for (int64_t x = 0; x < kw; ++x) dst[((o * kh + y) * kw + x) * in + c] = src[((o * in + c) * kh + y) * kw + x];
  return placed(std::move(nhwc));
}

}  // namespace hd
