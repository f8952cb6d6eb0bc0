// The GPU runtime as seen from plain C++ (no vendor headers): device discovery, memory and copies.
// Implemented once in gpu_runtime.cu for CUDA and HIP; linked only into GPU builds.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "core/tensor.h"
#include "ops/gpu/matrix_unit.h"

namespace hd::gpu {

// The device type this build's GPU code runs on: kCuda or kHip.
DeviceType build_device_type();
// Registers the device allocator for this build's vendor with core (idempotent). Every entry point
// that may touch a GPU calls it first.
void initialize();
int device_count();  // 0 when there is no usable GPU (or no driver)
// The vendor libraries' one-time start-up for `device`: cuDNN and cuBLASLt loading their engines and
// what their first heuristic query needs (about 0.2 s on the H100 machine), MIOpen, hipBLASLt and
// rocBLAS creating their handles. For a side thread (ops::LibraryWarmUp); failures are left for the
// ops' own first calls to report. library_warm_up.cpp.
void warm_up_libraries(int device);
std::string device_name(int index);  // asked once per device, then remembered

// Copies between tensors of equal shape and dtype, host to device, device to host or device to device,
// in order with the kernels on the device's stream. Copies that involve the host have finished when this
// returns; device-to-device copies are queued (and may be captured into a graph).
void copy(const Tensor& src, const Tensor& dst);
// `rows` runs of `width` bytes from src (one every src_pitch bytes) to dst (every dst_pitch) on one
// device, queued on its stream (capturable): ops::copy of views.
void copy_2d(const void* src, size_t src_pitch, void* dst, size_t dst_pitch, size_t width, size_t rows,
             const Device& device);
// `bytes` of zeros at dst on `device`, queued on its stream.
void fill_zeros(void* dst, size_t bytes, const Device& device);

// Queues a copy of `bytes` from page-locked host memory (Buffer::pinned_host) to `dst` on `device`'s
// stream and returns at once: the host memory must stay unchanged until synchronize(device). What
// overlaps the weights' uploads with the host's preparation of the next ones (ops/weight_upload.h).
void copy_to_device_async(const void* pinned_src, void* dst, size_t bytes, const Device& device);

// The one stream on which every op on `device` runs (created on first use; blocking with respect to the
// legacy default stream), as an opaque pointer for code that includes no vendor header.
void* native_stream(const Device& device);

// While one lives, the ops this thread queues on `device` run on `stream` (a caller's: PyTorch's current
// stream, from the extension) instead of the engine's own, so that they are ordered with the caller's
// work without a synchronisation. Scopes nest; a scope for one device leaves the others alone.
class ExternalStream {
 public:
  ExternalStream(const Device& device, void* stream);
  ~ExternalStream();
  ExternalStream(const ExternalStream&) = delete;
  ExternalStream& operator=(const ExternalStream&) = delete;

 private:
  int previous_device_;
  void* previous_stream_;
};

// A second stream of `device`, created on first use, for exchanges that overlap the engine's own stream's
// compute (the displaced image split's all-gathers): joined to and from native_stream with stream_wait.
void* side_stream(const Device& device);

// Makes what is queued on stream `waiting` from now on wait, on the device and not the host, for what is
// queued on stream `signalling` so far: how the engine's own stream joins a caller's (PyTorch's) and
// back without a synchronisation. Streams as native_stream gives them; both on the current device.
void stream_wait(void* waiting, void* signalling);
// The same for two streams of `device`, whatever the calling thread's current device.
void stream_wait(const Device& device, void* waiting, void* signalling);

// GPU work captured once and replayed as one launch (a CUDA / HIP graph). During capture the work's
// allocations come from a pool of the graph's own (caching_allocator.cpp), so no memory the graph uses
// is ever handed to other work; tensors the work allocated and the caller keeps (its outputs) stay valid,
// and every replay rewrites them. The work must not synchronise with the host or call the autotuner for
// a new shape: run it once uncaptured first.
class CapturedGraph {
 public:
  static CapturedGraph capture(const Device& device, const std::function<void()>& work);
  void replay() const;
  bool empty() const { return native_ == nullptr; }

 private:
  struct Native;
  std::shared_ptr<Native> native_;
};
void synchronize(const Device& device);

int multiprocessor_count(int index);
// The most shared memory one block may ask for on the device (its opt-in limit: 227 KiB on an H100,
// 163 KiB on an A100, 99 KiB on an RTX 30/40, 64 KiB on AMD GPUs).
size_t max_block_shared_bytes(int index);
// The matrix unit (matrix_unit.h) the kernels' fragment layer can drive on this device.
// The AMD family of an architecture name as the runtime reports it ("gfx1100", "gfx90a:sramecc+:xnack-").
MatrixUnit amd_matrix_unit(const std::string& gcn_arch_name);
MatrixUnit device_matrix_unit(int index);
// Whether the device runs Hopper's warpgroup instructions (wgmma, built for sm_90a): NVIDIA compute
// capability 9.0 exactly (H100, H200), and only in a build that compiled those kernels (HD_WITH_WGMMA).
// Asked of the runtime once per device.
bool has_warpgroup_mma(int index);

}  // namespace hd::gpu
