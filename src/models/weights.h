// Reads a component's weights by name, checking each shape against what the model's configuration
// expects, and places them where the model computes (f32 on the CPU, f16/bf16 on a GPU). Each tensor
// goes from the memory-mapped file straight into the compute dtype and layout in one pass over it,
// spread over the CPU's cores: into its final host tensor on the CPU, into page-locked staging on its way
// to a GPU (ops/weight_upload.h), never through an f32 copy. A component held in a caller's memory
// (held_component) is shared, not copied. Every failure names the component, the tensor and both shapes.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/tensor.h"
#include "io/model_source.h"
#include "ops/placement.h"
#include "ops/weight_upload.h"

namespace hd {

// The component's config.json as a JSON object (empty when there is none); throws when it is malformed.
nlohmann::json component_config(const ModelComponent& component);

class WeightReader {
 public:
  // `prefix` is put before every name asked for (e.g. "text_model." where a checkpoint nests them).
  // The uploads to a GPU are queued as the tensors are loaded; the last of them lands when the reader
  // (and every copy of it) is gone, or at the first op that reads them (same stream).
  WeightReader(const ModelComponent& component, std::string prefix, ops::Placement placement = {});

  const ops::Placement& placement() const { return placement_; }

  bool has(std::string_view name) const;
  // Whether the tensor is in a caller's memory (held_component) rather than a file: loading it shares
  // that memory, and whatever copies it (stacking, converting) would double it.
  bool held(std::string_view name) const;
  // The shape stored in the file; throws "missing tensor" when absent.
  std::vector<int64_t> shape(std::string_view name) const;
  OwnedTensor load(std::string_view name, const Shape& expected) const;
  // A convolution kernel stored as PyTorch's [Cout, Cin, kh, kw], returned in the engine's
  // [Cout, kh, kw, Cin] (the one conversion at load time that keeps every activation NHWC).
  OwnedTensor load_conv(std::string_view name, int64_t out, int64_t in, int64_t kh, int64_t kw) const;

 private:
  enum class Relayout { kNone, kTransposed, kConvToNhwc };

  const TensorRef& find(std::string_view name) const;
  void check_shape(const TensorRef& t, std::string_view name, const Shape& expected) const;
  // The stored tensor `t` in the placement's dtype and `shape`, re-laid-out as `relayout` says.
  OwnedTensor placed(const TensorRef& t, const Shape& shape, Relayout relayout) const;
  // A held tensor (held_component) as `shape`, sharing the caller's memory.
  OwnedTensor borrowed(const TensorRef& t, const Shape& shape) const;

  const ModelComponent& component_;
  std::string prefix_;
  ops::Placement placement_;
  std::shared_ptr<ops::WeightUploader> uploader_;  // GPU placements only
};

}  // namespace hd
