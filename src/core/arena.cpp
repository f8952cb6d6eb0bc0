#include "core/arena.h"

#include "core/error.h"

namespace hd {

Arena::Arena(Device device, size_t capacity_bytes) : block_(device, capacity_bytes) {}

Tensor Arena::allocate(Shape shape, DType dtype, std::string_view what) {
  const size_t bytes = size_t(shape.numel()) * dtype_size(dtype);
  const size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  HD_CHECK_KIND(rounded <= capacity() - offset_, ErrorKind::kOutOfMemory, "activation arena of ",
                format_bytes(capacity()), " on ", device().to_string(), " is exhausted allocating ", what, " ",
                dtype_name(dtype), shape.to_string(), " (", format_bytes(bytes), "; ",
                format_bytes(capacity() - offset_), " free); try a smaller image or batch, or tiling");
  void* ptr = static_cast<char*>(block_.data()) + offset_;
  offset_ += rounded;
  if (offset_ > peak_) peak_ = offset_;
  return Tensor::contiguous(ptr, dtype, shape, device());
}

void Arena::release(size_t mark) {
  HD_ASSERT(mark <= offset_);
  offset_ = mark;
}

}  // namespace hd
