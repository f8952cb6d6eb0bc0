// NcclGroup over NCCL's API (RCCL spells it the same). Collectives are queued on the rank's device stream
// (gpu::native_stream: the engine's, or a caller's ExternalStream), so they are captured into a graph
// with the work around them.
#include "comm/nccl_group.h"

#include <mutex>

#include "core/error.h"
#include "ops/ops.h"

#ifdef HD_WITH_NCCL
#ifdef HD_WITH_RCCL
#include <rccl/rccl.h>
#else
#include <nccl.h>
#endif
#include "ops/gpu/gpu_runtime.h"
#endif

namespace hd::comm {

#ifdef HD_WITH_NCCL

namespace {

#ifdef HD_WITH_RCCL
constexpr const char* kLibrary = "RCCL";
using NativeStream = hipStream_t;
#else
constexpr const char* kLibrary = "NCCL";
using NativeStream = cudaStream_t;
#endif

void check(ncclResult_t status, const char* call, ncclComm_t comm = nullptr) {
  if (status == ncclSuccess || status == ncclInProgress) return;
  std::string detail;
  if (comm != nullptr) {
    const char* last = ncclGetLastError(comm);
    if (last != nullptr && *last != '\0') detail = str_cat(" (", last, ")");
  }
  throw Error(status == ncclInvalidArgument || status == ncclInvalidUsage ? ErrorKind::kInvalidInput
                                                                          : ErrorKind::kRuntime,
              str_cat(kLibrary, " error '", ncclGetErrorString(status), "' from ", call, detail));
}

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::kF32: return ncclFloat32;
    case DType::kF16: return ncclFloat16;
    case DType::kBF16: return ncclBfloat16;
    case DType::kI32: return ncclInt32;
    case DType::kI64: return ncclInt64;
  }
  throw Error(ErrorKind::kUnsupported, str_cat(kLibrary, " has no type for ", dtype_name(t)));
}

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(ncclComm_t comm, int rank, int size, const Device& device)
      : Communicator(rank, size, device), comm_(comm), flag_(Shape{1}, DType::kF32, device) {}
  ~NcclCommunicator() override {
    if (aborted_.empty()) (void)ncclCommDestroy(comm_);
  }

  std::string describe() const override {
    return str_cat(nccl_version(), ", rank ", rank(), " of ", size(), " on ", device().to_string());
  }

  // From any thread: the rank's pending collectives end (their results are garbage: the rank's own calls
  // throw from now on, so no result of the group is used) and the communicator is freed.
  void abort(const std::string& why) {
    const std::lock_guard lock(mutex_);
    if (!aborted_.empty()) return;
    aborted_ = why;
    (void)ncclCommAbort(comm_);
  }

 protected:
  void all_gather_impl(const Tensor& in, const Tensor& out) override {
    const auto lock = usable();
    check(ncclAllGather(in.data, out.data, size_t(in.numel()), nccl_type(in.dtype), comm_, stream()),
          "ncclAllGather", comm_);
  }
  void all_reduce_sum_impl(const Tensor& inout) override {
    const auto lock = usable();
    check(ncclAllReduce(inout.data, inout.data, size_t(inout.numel()), nccl_type(inout.dtype), ncclSum, comm_,
                        stream()),
          "ncclAllReduce", comm_);
  }
  void send_impl(const Tensor& t, int peer) override {
    const auto lock = usable();
    check(ncclSend(t.data, size_t(t.numel()), nccl_type(t.dtype), peer, comm_, stream()), "ncclSend", comm_);
  }
  void receive_impl(const Tensor& t, int peer) override {
    const auto lock = usable();
    check(ncclRecv(t.data, size_t(t.numel()), nccl_type(t.dtype), peer, comm_, stream()), "ncclRecv", comm_);
  }
  void barrier_impl() override {
    {
      const auto lock = usable();
      check(ncclAllReduce(flag_.view().data, flag_.view().data, 1, ncclFloat32, ncclSum, comm_, stream()),
            "ncclAllReduce (barrier)", comm_);
    }
    ops::synchronize(device());
    const auto after = usable();  // aborted while it waited: the barrier did not hold
    ncclResult_t async = ncclSuccess;
    check(ncclCommGetAsyncError(comm_, &async), "ncclCommGetAsyncError", comm_);
    check(async, "a collective before the barrier", comm_);
  }

 private:
  NativeStream stream() const { return static_cast<NativeStream>(gpu::native_stream(device())); }
  // The communicator's mutex, held, once it is known not to be aborted (else an error saying why).
  std::unique_lock<std::mutex> usable() {
    std::unique_lock lock(mutex_);
    if (!aborted_.empty()) throw Error(ErrorKind::kRuntime, str_cat(kLibrary, " group aborted: ", aborted_));
    return lock;
  }

  ncclComm_t comm_;
  OwnedTensor flag_;  // the barrier's one value
  std::mutex mutex_;  // one call at a time, and no abort in the middle of one
  std::string aborted_;  // why, once aborted; under mutex_
};

}  // namespace

bool nccl_available() { return true; }

std::string nccl_version() {
  int code = 0;
  if (ncclGetVersion(&code) != ncclSuccess) return kLibrary;
  // NCCL_VERSION_CODE: major * 10000 + minor * 100 + patch since 2.9.
  return str_cat(kLibrary, " ", code / 10000, ".", code / 100 % 100, ".", code % 100);
}

NcclGroup::NcclGroup(std::span<const Device> devices) {
  HD_CHECK(!devices.empty(), "an NCCL group needs at least one device");
  std::vector<int> indices;
  for (const Device& d : devices) {
    HD_CHECK_KIND(d.type == gpu::build_device_type(), ErrorKind::kUnsupported, kLibrary, " groups GPUs of this build's vendor, not ",
                  d.to_string());
    for (int i : indices)
      HD_CHECK(i != d.index, "device ", d.to_string(), " is named twice: one rank per GPU");
    ops::prepare_device(d);
    indices.push_back(d.index);
  }
  std::vector<ncclComm_t> comms(devices.size());
  check(ncclCommInitAll(comms.data(), int(devices.size()), indices.data()), "ncclCommInitAll");
  for (size_t i = 0; i < devices.size(); ++i)
    communicators_.push_back(std::make_unique<NcclCommunicator>(comms[i], int(i), int(devices.size()), devices[i]));
}

NcclGroup::~NcclGroup() = default;

Communicator& NcclGroup::communicator(int rank) const {
  HD_CHECK(rank >= 0 && rank < size(), "rank ", rank, " is outside an NCCL group of ", size());
  return *communicators_[size_t(rank)];
}

void NcclGroup::abort(int rank, const std::string& why) {
  const std::string reason = rank < 0 ? why : str_cat("rank ", rank, " failed: ", why);
  for (auto& c : communicators_) static_cast<NcclCommunicator&>(*c).abort(reason);
}

#else  // no NCCL/RCCL in this build

bool nccl_available() { return false; }
std::string nccl_version() { return ""; }

NcclGroup::NcclGroup(std::span<const Device>) {
  throw Error(ErrorKind::kUnsupported,
              "this build has no NCCL/RCCL: several GPUs need a GPU build that found the library (CMake's "
              "HD_NCCL_ROOT, or RCCL in the ROCm prefix)");
}
NcclGroup::~NcclGroup() = default;
Communicator& NcclGroup::communicator(int) const { throw Error(ErrorKind::kInternal, "no NCCL group"); }
void NcclGroup::abort(int, const std::string&) {}

#endif

}  // namespace hd::comm
