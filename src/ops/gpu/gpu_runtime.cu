// Device discovery, the device allocator that core's Buffer uses, copies, and error reporting.
#include <atomic>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <tuple>

#include "core/startup_trace.h"
#include "ops/gpu/common.cuh"
#include "ops/gpu/device_memory.h"
#include "ops/gpu/gpu_runtime.h"

namespace hd::gpu {

void throw_gpu_error(cudaError_t status, const char* statement, const char* file, int line) {
  int device = -1;
  (void)cudaGetDevice(&device);
  const ErrorKind kind = status == cudaErrorMemoryAllocation ? ErrorKind::kOutOfMemory : ErrorKind::kRuntime;
  throw Error(kind, str_cat(HD_GPU_VENDOR, " error '", cudaGetErrorString(status), "' from `", statement, "` at ",
                            file, ":", line, " on device ", device));
}

void* device_malloc(const Device& device, size_t bytes) {
  HD_GPU_CHECK(cudaSetDevice(device.index));
  void* p = nullptr;
  const cudaError_t status = cudaMalloc(&p, bytes);
  if (status == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();  // clear the error so that later calls are not blamed
    return nullptr;
  }
  HD_GPU_CHECK(status);
  return p;
}

void device_free(const Device& device, void* p) noexcept {
  // A failure to free cannot be reported from a destructor; the driver's state is the only loss.
  (void)cudaSetDevice(device.index);
  (void)cudaFree(p);
}

void device_wait_idle(const Device& device) noexcept {
  if (cudaSetDevice(device.index) == cudaSuccess) (void)cudaDeviceSynchronize();
}

void* pinned_host_malloc(size_t bytes) {
  void* p = nullptr;
  const cudaError_t status = cudaHostAlloc(&p, bytes, cudaHostAllocPortable);
  if (status == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    return nullptr;
  }
  HD_GPU_CHECK(status);
  return p;
}

void pinned_host_free(void* p) noexcept { (void)cudaFreeHost(p); }

void device_memory_info(const Device& device, size_t* free_bytes, size_t* total_bytes) {
  *free_bytes = *total_bytes = 0;
  if (cudaSetDevice(device.index) == cudaSuccess) (void)cudaMemGetInfo(free_bytes, total_bytes);
}

DeviceType build_device_type() { return HD_GPU_DEVICE_TYPE; }

void initialize() { register_device_allocator(HD_GPU_DEVICE_TYPE, caching_allocator()); }

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

std::string device_name(int index) {
  // Asked once per device: the full property query is slow, and tuning keys name the device.
  static std::mutex mutex;
  static std::string names[16];
  const bool cached = index >= 0 && index < 16;
  if (cached) {
    const std::lock_guard lock(mutex);
    if (!names[index].empty()) return names[index];
  }
  cudaDeviceProp prop{};
  HD_GPU_CHECK(cudaGetDeviceProperties(&prop, index));
  if (cached) {
    const std::lock_guard lock(mutex);
    names[index] = prop.name;
  }
  return prop.name;
}

namespace {

constexpr int kMaxDevices = 64;

// The caller's stream of this thread's innermost ExternalStream, and its device (-1: none).
thread_local int external_device = -1;
thread_local cudaStream_t external_stream = nullptr;

cudaStream_t stream_for(int device) {
  if (device == external_device) return external_stream;
  static std::mutex mutex;
  static cudaStream_t streams[kMaxDevices] = {};
  HD_CHECK(device >= 0 && device < kMaxDevices, "device index ", device, " out of range");
  const std::lock_guard lock(mutex);
  if (streams[device] == nullptr) {
    int previous = 0;
    HD_GPU_CHECK(cudaGetDevice(&previous));
    HD_GPU_CHECK(cudaSetDevice(device));
    // Blocking (not cudaStreamNonBlocking): it stays ordered with the legacy stream that libraries and
    // synchronous calls use.
    HD_GPU_CHECK(cudaStreamCreate(&streams[device]));
    HD_GPU_CHECK(cudaSetDevice(previous));
  }
  return streams[device];
}

}  // namespace

cudaStream_t current_stream() {
  int device = 0;
  HD_GPU_CHECK(cudaGetDevice(&device));
  return stream_for(device);
}

void* native_stream(const Device& device) { return stream_for(device.index); }

void* side_stream(const Device& device) {
  static std::mutex mutex;
  static cudaStream_t streams[kMaxDevices] = {};
  HD_CHECK(device.index >= 0 && device.index < kMaxDevices, "device index ", device.index, " out of range");
  const std::lock_guard lock(mutex);
  if (streams[device.index] == nullptr) {
    int previous = 0;
    HD_GPU_CHECK(cudaGetDevice(&previous));
    HD_GPU_CHECK(cudaSetDevice(device.index));
    HD_GPU_CHECK(cudaStreamCreate(&streams[device.index]));
    HD_GPU_CHECK(cudaSetDevice(previous));
  }
  return streams[device.index];
}

ExternalStream::ExternalStream(const Device& device, void* stream)
    : previous_device_(external_device), previous_stream_(external_stream) {
  HD_CHECK(device.is_gpu(), "ExternalStream: ", device.to_string(), " is not a GPU");
  external_device = device.index;
  external_stream = static_cast<cudaStream_t>(stream);
}

ExternalStream::~ExternalStream() {
  external_device = previous_device_;
  external_stream = static_cast<cudaStream_t>(previous_stream_);
}

void copy(const Tensor& src, const Tensor& dst) {
  HD_CHECK(src.shape == dst.shape && src.dtype == dst.dtype, "gpu copy: ", src.describe(), " does not match ",
           dst.describe());
  HD_CHECK(src.is_contiguous() && dst.is_contiguous(), "gpu copy: both tensors must be contiguous");
  HD_CHECK(src.device.is_gpu() || dst.device.is_gpu(), "gpu copy: neither tensor is on a GPU");
  const auto kind = src.device.is_cpu()   ? cudaMemcpyHostToDevice
                    : dst.device.is_cpu() ? cudaMemcpyDeviceToHost
                                          : cudaMemcpyDeviceToDevice;
  if (src.nbytes() == 0) return;
  const Device& gpu = src.device.is_gpu() ? src.device : dst.device;
  HD_GPU_CHECK(cudaSetDevice(gpu.index));
  cudaStream_t stream = stream_for(gpu.index);
  // In stream order with the kernels, so that a device-to-device copy can be part of a captured graph;
  // a copy that involves host memory returns only when it is done, as the caller expects.
  HD_GPU_CHECK(cudaMemcpyAsync(dst.data, src.data, src.nbytes(), kind, stream));
  if (kind != cudaMemcpyDeviceToDevice) HD_GPU_CHECK(cudaStreamSynchronize(stream));
}

void copy_2d(const void* src, size_t src_pitch, void* dst, size_t dst_pitch, size_t width, size_t rows,
             const Device& device) {
  if (width == 0 || rows == 0) return;
  HD_GPU_CHECK(cudaSetDevice(device.index));
  HD_GPU_CHECK(cudaMemcpy2DAsync(dst, dst_pitch, src, src_pitch, width, rows, cudaMemcpyDeviceToDevice,
                                 stream_for(device.index)));
}

void fill_zeros(void* dst, size_t bytes, const Device& device) {
  if (bytes == 0) return;
  HD_GPU_CHECK(cudaSetDevice(device.index));
  HD_GPU_CHECK(cudaMemsetAsync(dst, 0, bytes, stream_for(device.index)));
}

void copy_to_device_async(const void* pinned_src, void* dst, size_t bytes, const Device& device) {
  if (bytes == 0) return;
  HD_GPU_CHECK(cudaSetDevice(device.index));
  HD_GPU_CHECK(cudaMemcpyAsync(dst, pinned_src, bytes, cudaMemcpyHostToDevice, stream_for(device.index)));
}

// ---- graphs ----

struct CapturedGraph::Native {
  Device device;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  int pool = 0;
  ~Native() {
    (void)cudaSetDevice(device.index);
    if (exec) (void)cudaGraphExecDestroy(exec);
    if (graph) (void)cudaGraphDestroy(graph);
    release_private_pool(device, pool);
  }
};

CapturedGraph CapturedGraph::capture(const Device& device, const std::function<void()>& work) {
  HD_GPU_CHECK(cudaSetDevice(device.index));
  cudaStream_t stream = stream_for(device.index);
  auto native = std::make_shared<Native>();
  native->device = device;
  native->pool = begin_private_pool(device);
  // Relaxed: allocations that miss the private pool may still call the vendor's allocator.
  const StartupSpan span("graph capture");
  HD_GPU_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed));
  try {
    work();
  } catch (...) {
    cudaGraph_t partial = nullptr;
    (void)cudaStreamEndCapture(stream, &partial);
    if (partial) (void)cudaGraphDestroy(partial);
    (void)cudaGetLastError();
    end_private_pool(device);
    throw;
  }
  const cudaError_t ended = cudaStreamEndCapture(stream, &native->graph);
  end_private_pool(device);
  HD_GPU_CHECK(ended);
  const StartupSpan instantiate_span("graph instantiation");
#if defined(HD_GPU_HIP)
  HD_GPU_CHECK(hipGraphInstantiate(&native->exec, native->graph, nullptr, nullptr, 0));
#else
  HD_GPU_CHECK(cudaGraphInstantiate(&native->exec, native->graph, 0));
#endif
  CapturedGraph g;
  g.native_ = std::move(native);
  return g;
}

void CapturedGraph::replay() const {
  HD_CHECK(native_ != nullptr, "replay of an empty captured graph");
  HD_GPU_CHECK(cudaSetDevice(native_->device.index));
  HD_GPU_CHECK(cudaGraphLaunch(native_->exec, stream_for(native_->device.index)));
}

void allow_dynamic_shared_memory(const void* kernel, size_t bytes, int device) {
  static std::mutex mutex;
  static std::set<std::pair<const void*, int>> done;
  const std::lock_guard lock(mutex);
  if (done.insert({kernel, device}).second)
    HD_GPU_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
}

int resident_blocks(const void* kernel, int threads, size_t shared_bytes, int device) {
  static std::mutex mutex;
  static std::map<std::tuple<const void*, int, size_t, int>, int> known;
  const std::lock_guard lock(mutex);
  const auto [at, fresh] = known.try_emplace({kernel, threads, shared_bytes, device}, 0);
  if (fresh) {
    int per_multiprocessor = 0;
    HD_GPU_CHECK(
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_multiprocessor, kernel, threads, shared_bytes));
    at->second = per_multiprocessor * multiprocessor_count(device);
  }
  return at->second;
}

// Attribute queries, not cudaGetDeviceProperties: ops ask on every call, and the full query is slow.
int multiprocessor_count(int index) {
  int count = 0;
  HD_GPU_CHECK(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, index));
  return count;
}

size_t max_block_shared_bytes(int index) {
  int bytes = 0;
  HD_GPU_CHECK(cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, index));
  return size_t(bytes);
}

bool has_warpgroup_mma(int index) {
#if defined(HD_WITH_WGMMA)
  static std::atomic<int8_t> known[16] = {};  // 0 not asked, 1 no, 2 yes
  if (index >= 0 && index < 16 && known[index] != 0) return known[index] == 2;
  int major = 0, minor = 0;
  HD_GPU_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, index));
  HD_GPU_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, index));
  const bool yes = major == 9 && minor == 0;
  if (index >= 0 && index < 16) known[index] = yes ? 2 : 1;
  return yes;
#else
  (void)index;
  return false;
#endif
}

MatrixUnit amd_matrix_unit(const std::string& name) {
  const auto starts = [&](const char* prefix) { return name.rfind(prefix, 0) == 0; };
  if (starts("gfx90a") || starts("gfx942") || starts("gfx950")) return MatrixUnit::kAmdMfma;
  if (starts("gfx11")) return MatrixUnit::kAmdWmma11;
  if (starts("gfx12")) return MatrixUnit::kAmdWmma12;
  return MatrixUnit::kNone;  // gfx10 (RDNA2) has no matrix cores; older CDNA (gfx908) is not built
}

MatrixUnit device_matrix_unit(int index) {
#if defined(HD_GPU_HIP)
  // Asked once per device: the full property query is slow.
  static std::mutex mutex;
  static MatrixUnit known[16] = {};
  static bool asked[16] = {};
  const std::lock_guard lock(mutex);
  if (index >= 0 && index < 16 && asked[index]) return known[index];
  cudaDeviceProp prop{};
  HD_GPU_CHECK(cudaGetDeviceProperties(&prop, index));
  const MatrixUnit unit = amd_matrix_unit(prop.gcnArchName);
  if (index >= 0 && index < 16) known[index] = unit, asked[index] = true;
  return unit;
#else
  int major = 0;
  HD_GPU_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, index));
  return major >= 8 ? MatrixUnit::kNvidiaMma : MatrixUnit::kNone;  // mma.sync.m16n8k16 for f16 and bf16
#endif
}

void stream_wait(void* waiting, void* signalling) {
  if (waiting == signalling) return;
  cudaEvent_t done = nullptr;
  HD_GPU_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  const cudaError_t recorded = cudaEventRecord(done, static_cast<cudaStream_t>(signalling));
  const cudaError_t waited =
      recorded == cudaSuccess ? cudaStreamWaitEvent(static_cast<cudaStream_t>(waiting), done, 0) : recorded;
  // Destroying an event that work still waits for is allowed: it goes when that work has seen it.
  HD_GPU_CHECK(cudaEventDestroy(done));
  HD_GPU_CHECK(waited);
}

void stream_wait(const Device& device, void* waiting, void* signalling) {
  HD_GPU_CHECK(cudaSetDevice(device.index));
  stream_wait(waiting, signalling);
}

void synchronize(const Device& device) {
  HD_GPU_CHECK(cudaSetDevice(device.index));
  HD_GPU_CHECK(cudaDeviceSynchronize());
}

}  // namespace hd::gpu
