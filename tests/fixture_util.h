// Access to the fixtures in tests/fixtures/, which tools/make_fixtures.py recorded from PyTorch and
// diffusers: the file, its JSON case list, and tensors as f32 vectors.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "io/safetensors.h"

namespace hd::test {

class Fixture {
 public:
  explicit Fixture(const std::string& relative_path);  // under tests/fixtures/

  const nlohmann::json& cases() const { return cases_; }
  std::vector<float> floats(const std::string& tensor_name) const;
  std::vector<int64_t> ints(const std::string& tensor_name) const;  // an I64 tensor
  const std::vector<int64_t>& shape(const std::string& tensor_name) const;
  bool has(const std::string& tensor_name) const { return file_.find(tensor_name) != nullptr; }
  // An NCHW f32 fixture tensor in the engine's NHWC layout.
  OwnedTensor nhwc(const std::string& tensor_name) const;
  // A fixture tensor in f32, shaped as stored (for tensors whose layout is the engine's too).
  OwnedTensor tensor(const std::string& tensor_name) const;

 private:
  SafetensorsFile file_;
  nlohmann::json cases_;
};

// The values of `t` as doubles, the form relative_l2 takes its reference in.
std::vector<double> as_reference(const Tensor& t);

}  // namespace hd::test
