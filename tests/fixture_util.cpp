#include "fixture_util.h"

#include <cstring>

namespace hd::test {

Fixture::Fixture(const std::string& relative_path)
    : file_(SafetensorsFile::open(std::string(HD_SOURCE_DIR) + "/tests/fixtures/" + relative_path)),
      cases_(nlohmann::json::parse(file_.metadata().at("cases"))) {}

std::vector<float> Fixture::floats(const std::string& tensor_name) const {
  const OwnedTensor t = file_.load(file_.at(tensor_name), DType::kF32);
  const float* p = t.ptr<float>();
  return std::vector<float>(p, p + t.view().numel());
}

const std::vector<int64_t>& Fixture::shape(const std::string& tensor_name) const {
  return file_.at(tensor_name).shape;
}

}  // namespace hd::test
