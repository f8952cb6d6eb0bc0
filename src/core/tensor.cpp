#include "core/tensor.h"

#include <cstring>
#include <limits>

#include "core/error.h"

namespace hd {

Shape::Shape(std::initializer_list<int64_t> dims) {
  HD_CHECK(dims.size() <= size_t(kMaxRank), "rank ", dims.size(), " exceeds the maximum of ", kMaxRank);
  for (int64_t d : dims) dims_[rank_++] = d;
}

Shape Shape::of_rank(int rank) {
  HD_CHECK(rank >= 0 && rank <= kMaxRank, "rank ", rank, " outside [0, ", kMaxRank, "]");
  Shape s;
  s.rank_ = rank;
  return s;
}

void Shape::push_back(int64_t d) {
  HD_CHECK(rank_ < kMaxRank, "rank exceeds the maximum of ", kMaxRank);
  dims_[rank_++] = d;
}

int64_t Shape::numel() const {
  int64_t n = 1;
  for (int i = 0; i < rank_; ++i) {
    HD_CHECK(dims_[i] >= 0, "negative dimension in shape ", to_string());
    HD_CHECK(dims_[i] == 0 || n <= std::numeric_limits<int64_t>::max() / dims_[i], "shape ", to_string(),
             " has more elements than fit in 64 bits");
    n *= dims_[i];
  }
  return n;
}

std::string Shape::to_string() const {
  std::string s = "[";
  for (int i = 0; i < rank_; ++i) s += (i ? ", " : "") + std::to_string(dims_[i]);
  return s + "]";
}

bool operator==(const Shape& a, const Shape& b) {
  if (a.rank_ != b.rank_) return false;
  for (int i = 0; i < a.rank_; ++i)
    if (a.dims_[i] != b.dims_[i]) return false;
  return true;
}

Tensor Tensor::contiguous(void* data, DType dtype, Shape shape, Device device) {
  Tensor t;
  t.data = data;
  t.dtype = dtype;
  t.shape = shape;
  t.device = device;
  t.strides = Shape::of_rank(shape.rank());
  int64_t stride = 1;
  for (int i = shape.rank() - 1; i >= 0; --i) {
    t.strides[i] = stride;
    stride *= shape[i];
  }
  return t;
}

bool Tensor::is_contiguous() const {
  int64_t expected = 1;
  for (int i = rank() - 1; i >= 0; --i) {
    if (shape[i] != 1 && strides[i] != expected) return false;
    expected *= shape[i];
  }
  return true;
}

namespace {
template <typename T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() { return DType::kF32; }
template <>
constexpr DType dtype_of<Half>() { return DType::kF16; }
template <>
constexpr DType dtype_of<BFloat16>() { return DType::kBF16; }
template <>
constexpr DType dtype_of<int32_t>() { return DType::kI32; }
template <>
constexpr DType dtype_of<int64_t>() { return DType::kI64; }

template <typename T>
T* typed(const Tensor& t) {
  HD_CHECK(t.dtype == dtype_of<T>(), "expected a ", dtype_name(dtype_of<T>()), " tensor, got ", t.describe());
  return static_cast<T*>(t.data);
}
}  // namespace

template <>
float* Tensor::ptr<float>() const { return typed<float>(*this); }
template <>
Half* Tensor::ptr<Half>() const { return typed<Half>(*this); }
template <>
BFloat16* Tensor::ptr<BFloat16>() const { return typed<BFloat16>(*this); }
template <>
int32_t* Tensor::ptr<int32_t>() const { return typed<int32_t>(*this); }
template <>
int64_t* Tensor::ptr<int64_t>() const { return typed<int64_t>(*this); }

Tensor Tensor::reshape(Shape new_shape) const {
  HD_CHECK(is_contiguous(), "cannot reshape the non-contiguous ", describe());
  HD_CHECK(new_shape.numel() == numel(), "cannot reshape ", describe(), " to ", new_shape.to_string());
  return contiguous(data, dtype, new_shape, device);
}

Tensor Tensor::slice(int d, int64_t start, int64_t length) const {
  if (d < 0) d += rank();
  HD_CHECK(d >= 0 && d < rank(), "slice dimension out of range for ", describe());
  HD_CHECK(start >= 0 && length >= 0 && start + length <= shape[d], "slice [", start, ", ", start + length,
           ") out of range along dimension ", d, " of ", describe());
  Tensor t = *this;
  t.data = static_cast<char*>(data) + start * strides[d] * int64_t(dtype_size(dtype));
  t.shape[d] = length;
  return t;
}

std::string Tensor::describe() const {
  return str_cat(dtype_name(dtype), shape.to_string(), " on ", device.to_string());
}

OwnedTensor::OwnedTensor(Shape shape, DType dtype, Device device)
    : buffer_(device, size_t(shape.numel()) * dtype_size(dtype)),
      view_(Tensor::contiguous(buffer_.data(), dtype, shape, device)) {}

OwnedTensor OwnedTensor::pinned_host(Shape shape, DType dtype, const Device& gpu) {
  OwnedTensor out;
  out.buffer_ = Buffer::pinned_host(gpu, size_t(shape.numel()) * dtype_size(dtype));
  out.view_ = Tensor::contiguous(out.buffer_.data(), dtype, shape, Device::cpu());
  return out;
}

OwnedTensor OwnedTensor::borrowed(const Tensor& t) {
  HD_CHECK(t.is_contiguous(), "borrowed: ", t.describe(), " is not dense");
  OwnedTensor out;
  out.view_ = t;
  return out;
}

OwnedTensor OwnedTensor::copy_of(const Tensor& t) {
  HD_CHECK(t.device.is_cpu(), "copy_of: ", t.describe(), " is not on the host");
  OwnedTensor out(t.shape, t.dtype);
  const size_t element = dtype_size(t.dtype);
  const auto* src = static_cast<const char*>(t.data);
  auto* dst = static_cast<char*>(out.view().data);
  if (t.is_contiguous()) {
    if (t.nbytes() > 0) std::memcpy(dst, src, t.nbytes());
    return out;
  }
  const int64_t count = t.numel();
  for (int64_t i = 0; i < count; ++i) {  // walk the index in row-major order
    int64_t rest = i, offset = 0;
    for (int d = t.rank() - 1; d >= 0; --d) {
      offset += rest % t.shape[d] * t.strides[d];
      rest /= t.shape[d];
    }
    std::memcpy(dst + size_t(i) * element, src + offset * int64_t(element), element);
  }
  return out;
}

}  // namespace hd
