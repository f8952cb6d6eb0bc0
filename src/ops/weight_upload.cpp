#include "ops/weight_upload.h"

#include "core/error.h"
#include "ops/ops.h"
#if defined(HD_WITH_GPU)
#include "ops/gpu/gpu_runtime.h"
#endif

namespace hd::ops {

namespace {

// Two slots: the host fills one while the other's copies run. 64 MiB holds every SD weight but the
// token embeddings (76-126 MiB), which take a buffer of their own.
constexpr size_t kSlotBytes = size_t(64) << 20;
// Tensors too large for a slot keep their staging until the copies are waited for: at most this much.
constexpr size_t kMaxLargeBytes = size_t(512) << 20;
constexpr size_t kAlignment = 256;

}  // namespace

WeightUploader::WeightUploader(const Device& gpu) : gpu_(gpu) {
  HD_CHECK(gpu.is_gpu(), "WeightUploader: ", gpu.to_string(), " is not a GPU");
}

WeightUploader::~WeightUploader() {
  try {
    finish();
  } catch (...) {
    // A failed copy surfaces at the next op on the device; the staging memory must not go back before
    // the copies that read it have stopped, so wait once more without throwing.
    try {
      synchronize(gpu_);
    } catch (...) {
    }
  }
}

void WeightUploader::finish() {
  synchronize(gpu_);
  in_flight_[0] = in_flight_[1] = false;
  used_ = 0;
  large_.clear();
  large_bytes_ = 0;
}

void* WeightUploader::staging_for(size_t bytes) {
  if (!pinned_) return nullptr;
  try {
    if (bytes > kSlotBytes) {
      if (large_bytes_ + bytes > kMaxLargeBytes) finish();
      large_.push_back(Buffer::pinned_host(gpu_, bytes));
      large_bytes_ += bytes;
      return large_.back().data();
    }
    if (used_ + bytes > kSlotBytes) {  // the next slot; its copies, queued a slot ago, must have landed
      slot_ ^= 1;
      used_ = 0;
      if (in_flight_[slot_]) finish();
    }
    if (slots_[slot_].size() == 0) slots_[slot_] = Buffer::pinned_host(gpu_, kSlotBytes);
    void* at = static_cast<char*>(slots_[slot_].data()) + used_;
    used_ += (bytes + kAlignment - 1) / kAlignment * kAlignment;
    in_flight_[slot_] = true;
    return at;
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kOutOfMemory) throw;
    pinned_ = false;  // ordinary memory from now on
    return nullptr;
  }
}

OwnedTensor WeightUploader::upload(const Shape& shape, DType dtype, const std::function<void(void* host)>& fill) {
  OwnedTensor on_device(shape, dtype, gpu_);
  const size_t bytes = size_t(shape.numel()) * dtype_size(dtype);
  if (bytes == 0) return on_device;
  if (void* staging = staging_for(bytes)) {
    fill(staging);
#if defined(HD_WITH_GPU)
    gpu::copy_to_device_async(staging, on_device.view().data, bytes, gpu_);
#else
    HD_ASSERT(false);  // a GPU tensor was allocated above: this build has a GPU runtime
#endif
    return on_device;
  }
  OwnedTensor host(shape, dtype);
  fill(host.view().data);
  copy(host, on_device);
  return on_device;
}

}  // namespace hd::ops
