// Tensor: a view of memory owned elsewhere (a Buffer, the arena, a memory-mapped checkpoint).
// It knows its element type, shape, strides (in elements) and device, and nothing about ownership.
// OwnedTensor pairs a Buffer with the view of it, for results and tests.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>

#include "core/buffer.h"
#include "core/device.h"
#include "core/dtype.h"

namespace hd {

inline constexpr int kMaxRank = 6;

class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims);
  static Shape of_rank(int rank);  // all dims 0

  int rank() const { return rank_; }
  int64_t operator[](int i) const { return dims_[i]; }
  int64_t& operator[](int i) { return dims_[i]; }
  // Negative indices count from the end, as in Python: back(1) == dims[rank-1].
  int64_t back(int from_end = 1) const { return dims_[rank_ - from_end]; }
  const int64_t* begin() const { return dims_; }
  const int64_t* end() const { return dims_ + rank_; }
  void push_back(int64_t d);

  // Product of the dims; throws Error when it overflows int64 or a dim is negative.
  int64_t numel() const;
  std::string to_string() const;  // "[2, 64, 64, 320]"
  friend bool operator==(const Shape& a, const Shape& b);

 private:
  int64_t dims_[kMaxRank] = {};
  int rank_ = 0;
};

struct Tensor {
  void* data = nullptr;
  DType dtype = DType::kF32;
  Shape shape;
  Shape strides;  // in elements
  Device device;

  // A dense row-major view of `data`.
  static Tensor contiguous(void* data, DType dtype, Shape shape, Device device = Device::cpu());

  int rank() const { return shape.rank(); }
  int64_t dim(int i) const { return shape[i < 0 ? shape.rank() + i : i]; }
  int64_t numel() const { return shape.numel(); }
  size_t nbytes() const { return size_t(numel()) * dtype_size(dtype); }
  bool is_contiguous() const;

  // Typed pointer; throws if T does not match dtype.
  template <typename T>
  T* ptr() const;

  // Same data, new shape with the same element count; requires a contiguous view.
  Tensor reshape(Shape new_shape) const;
  // The view of indices [start, start + length) along `dim`.
  Tensor slice(int dim, int64_t start, int64_t length) const;

  std::string describe() const;  // "f32[2, 77, 768] on cpu"
};

// A Buffer and the dense view of it.
class OwnedTensor {
 public:
  OwnedTensor() = default;
  OwnedTensor(Shape shape, DType dtype, Device device = Device::cpu());

  // Host memory that copies to and from `gpu` move fastest (Buffer::pinned_host; ordinary memory when
  // `gpu` is the CPU). The tensor's device is the CPU.
  static OwnedTensor pinned_host(Shape shape, DType dtype, const Device& gpu);
  // A dense host copy of a host tensor (any strides).
  static OwnedTensor copy_of(const Tensor& t);
  // A new dense tensor of `shape` with t's dtype and device (contents undefined).
  static OwnedTensor like(const Tensor& t, Shape shape) { return OwnedTensor(shape, t.dtype, t.device); }
  // A dense tensor in memory owned elsewhere (a caller's weights: the PyTorch extension runs models on a
  // pipeline's own): nothing is freed with it, so the memory must outlive it.
  static OwnedTensor borrowed(const Tensor& t);

  const Tensor& view() const { return view_; }
  Tensor& view() { return view_; }
  operator const Tensor&() const { return view_; }
  template <typename T>
  T* ptr() const { return view_.ptr<T>(); }

 private:
  Buffer buffer_;
  Tensor view_;
};

template <>
float* Tensor::ptr<float>() const;
template <>
Half* Tensor::ptr<Half>() const;
template <>
BFloat16* Tensor::ptr<BFloat16>() const;
template <>
int32_t* Tensor::ptr<int32_t>() const;
template <>
int64_t* Tensor::ptr<int64_t>() const;

}  // namespace hd
