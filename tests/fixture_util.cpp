#include "fixture_util.h"

#include <cstring>

#include "core/error.h"
#include "core/layout.h"

namespace hd::test {

Fixture::Fixture(const std::string& relative_path)
    : file_(SafetensorsFile::open(std::string(HD_SOURCE_DIR) + "/tests/fixtures/" + relative_path)),
      cases_(nlohmann::json::parse(file_.metadata().at("cases"))) {}

std::vector<float> Fixture::floats(const std::string& tensor_name) const {
  const OwnedTensor t = file_.load(file_.at(tensor_name), DType::kF32);
  const float* p = t.ptr<float>();
  return std::vector<float>(p, p + t.view().numel());
}

std::vector<int64_t> Fixture::ints(const std::string& tensor_name) const {
  const SafetensorsEntry& e = file_.at(tensor_name);
  HD_CHECK(e.dtype_name == "I64", tensor_name, " is ", e.dtype_name, ", not I64");
  std::vector<int64_t> v(size_t(e.numel));
  if (!v.empty()) std::memcpy(v.data(), file_.raw(e).data(), e.nbytes());
  return v;
}

OwnedTensor Fixture::nhwc(const std::string& tensor_name) const {
  const std::vector<int64_t>& s = shape(tensor_name);
  HD_CHECK(s.size() == 4, tensor_name, " is not a 4-D NCHW tensor");
  const std::vector<float> v = floats(tensor_name);
  OwnedTensor t(Shape{s[0], s[2], s[3], s[1]}, DType::kF32);
  nchw_to_nhwc(v.data(), t.ptr<float>(), s[0], s[1], s[2], s[3]);
  return t;
}

OwnedTensor Fixture::tensor(const std::string& tensor_name) const {
  return file_.load(file_.at(tensor_name), DType::kF32);
}

std::vector<double> as_reference(const Tensor& t) {
  const float* p = t.ptr<float>();
  return std::vector<double>(p, p + t.numel());
}

const std::vector<int64_t>& Fixture::shape(const std::string& tensor_name) const {
  return file_.at(tensor_name).shape;
}

}  // namespace hd::test
