#include "models/stacked_linear.h"

#include "core/error.h"
#include "ops/ops.h"

namespace hd {

StackedLinear StackedLinear::load(const WeightReader& w, const std::vector<std::string>& names, int64_t out,
                                  int64_t in) {
  HD_ASSERT(!names.empty());
  StackedLinear s;
  s.parts_ = names.size();
  s.out_ = out;
  bool held = false;
  for (const std::string& name : names) held = held || w.held(name + ".weight");
  for (const std::string& name : names) s.weights_.push_back(w.load(name + ".weight", Shape{out, in}));
  if (held || names.size() == 1) return s;
  OwnedTensor stacked = OwnedTensor::like(s.weights_.front().view(), Shape{int64_t(names.size()) * out, in});
  for (size_t i = 0; i < names.size(); ++i)
    ops::copy(s.weights_[i].view(), stacked.view().slice(0, int64_t(i) * out, out));
  s.weights_.clear();
  s.weights_.push_back(std::move(stacked));
  return s;
}

Tensor StackedLinear::weight(size_t i) const {
  HD_ASSERT(i < parts_);
  if (weights_.size() == parts_) return weights_[i].view();
  return weights_.front().view().slice(0, int64_t(i) * out_, out_);
}

StackedLinear::Outputs StackedLinear::operator()(const Tensor& x) const {
  Outputs o;
  Shape shape = x.shape;
  const int last = shape.rank() - 1;
  for (const OwnedTensor& w : weights_) {
    shape[last] = w.view().dim(0);
    o.storage.push_back(OwnedTensor::like(x, shape));
    ops::linear(x, w.view(), nullptr, nullptr, o.storage.back());
  }
  for (size_t i = 0; i < parts_; ++i)
    o.parts.push_back(weights_.size() == parts_
                          ? o.storage[i].view()
                          : o.storage.front().view().slice(last, int64_t(i) * out_, out_));
  return o;
}

}  // namespace hd
