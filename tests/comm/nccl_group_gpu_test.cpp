// Collectives on GPUs: NCCL (or RCCL) through its real API with one rank (any machine with a GPU) and
// with one rank per GPU where there are several, in and out of a captured graph; the in-process group
// with device copies at 2 and 4 logical ranks of one GPU. Values against the host's sums. A collective
// that a rank never joins, ended by the watchdog: not yet (see the test).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <vector>

#include "comm/in_process_group.h"
#include "comm/nccl_group.h"
#include "comm/rank_threads.h"
#include "ops/gpu/gpu_runtime.h"
#include "ops/ops.h"
#include "ops/placement.h"
#include "test_util.h"

namespace hd::comm {
namespace {

// Registers the GPU runtime first: ctest runs each test in a process of its own.
Device gpu(int index) {
  gpu::initialize();
  return Device{gpu::build_device_type(), index};
}

// Rank r's input: random f16 rows [2, 64] on `device`, and the host f32 copy of what was sent.
struct RankInput {
  OwnedTensor host, device;
};

std::vector<RankInput> inputs(test::Rng& rng, const std::vector<Device>& devices) {
  std::vector<RankInput> out;
  for (const Device& d : devices) {
    RankInput in;
    in.device = ops::place(test::random_tensor(rng, Shape{2, 64}), ops::Placement{d, DType::kF16});
    in.host = ops::to_host_f32(in.device);
    out.push_back(std::move(in));
  }
  return out;
}

// Every collective on every rank: all_gather, all_reduce_sum and a ring of send/receive, checked.
void check_collectives(const std::vector<Device>& devices, const std::function<Communicator&(int)>& rank_of,
                       const std::function<void(int, const std::string&)>& on_failure) {
  test::Rng rng;
  HD_SEED_TRACE(rng);
  const int n = int(devices.size());
  std::vector<RankInput> in = inputs(rng, devices);
  std::vector<double> sum(128, 0.0);
  for (const RankInput& r : in)
    for (size_t i = 0; i < 128; ++i) sum[i] += double(r.host.ptr<float>()[i]);
  std::vector<OwnedTensor> gathered(static_cast<size_t>(n)), reduced(static_cast<size_t>(n)), received(static_cast<size_t>(n));
  run_ranks(
      n,
      [&](int rank) {
        Communicator& c = rank_of(rank);
        const Device& d = devices[size_t(rank)];
        OwnedTensor all(Shape{2 * n, 64}, DType::kF16, d), x(Shape{2, 64}, DType::kF16, d), got(Shape{2, 64}, DType::kF16, d);
        c.all_gather(in[size_t(rank)].device, all);
        ops::copy(in[size_t(rank)].device, x);
        c.all_reduce_sum(x);
        if (n > 1) {
          if (rank % 2 == 0) {
            c.send(in[size_t(rank)].device, (rank + 1) % n);
            c.receive(got, (rank + n - 1) % n);
          } else {
            c.receive(got, (rank + n - 1) % n);
            c.send(in[size_t(rank)].device, (rank + 1) % n);
          }
        }
        c.barrier();
        gathered[size_t(rank)] = ops::to_host_f32(all);
        reduced[size_t(rank)] = ops::to_host_f32(x);
        if (n > 1) received[size_t(rank)] = ops::to_host_f32(got);
      },
      on_failure);
  for (int rank = 0; rank < n; ++rank) {
    SCOPED_TRACE(rank);
    for (int r = 0; r < n; ++r)
      EXPECT_EQ(test::to_vector(gathered[size_t(rank)].view().slice(0, 2 * r, 2)), test::to_vector(in[size_t(r)].host));
    // f16 sums of n values: within f16's rounding of the result.
    EXPECT_LE(test::max_abs_diff(reduced[size_t(rank)], sum), 4e-3 * n);
    if (n > 1) {
      EXPECT_EQ(test::to_vector(received[size_t(rank)]), test::to_vector(in[size_t((rank + n - 1) % n)].host));
    }
  }
}

TEST(GpuNcclGroup, OneRankThroughTheRealApiAndInACapturedGraph) {
  if (!nccl_available()) GTEST_SKIP() << "this build has no NCCL/RCCL";
  const std::vector<Device> devices = {gpu(0)};
  NcclGroup group(devices);
  EXPECT_NE(group.communicator(0).describe().find("rank 0 of 1"), std::string::npos);
  check_collectives(devices, [&](int r) -> Communicator& { return group.communicator(r); },
                    [&](int r, const std::string& why) { group.abort(r, why); });
  // Captured: an all-reduce between two kernels, replayed twice.
  test::Rng rng;
  const OwnedTensor host = test::random_tensor(rng, Shape{256});
  OwnedTensor x = ops::place(host, ops::Placement{gpu(0), DType::kF32});
  OwnedTensor y(Shape{256}, DType::kF32, gpu(0));
  Communicator& c = group.communicator(0);
  const auto work = [&] {
    ops::scale(x, 2.0f, y);
    c.all_reduce_sum(y);
    ops::scale(y, 0.5f, y);
  };
  work();
  const gpu::CapturedGraph graph = gpu::CapturedGraph::capture(gpu(0), work);
  // New input, the output poisoned: only the replayed graph can write 3 x host into y.
  OwnedTensor tripled(Shape{256}, DType::kF32);
  for (int64_t i = 0; i < 256; ++i) tripled.ptr<float>()[i] = 3.0f * host.ptr<float>()[i];
  ops::copy(tripled, x);
  ops::copy(test::poisoned_tensor(Shape{256}), y);
  graph.replay();
  ops::synchronize(gpu(0));
  EXPECT_EQ(test::to_vector(ops::to_host_f32(y)), test::to_vector(tripled));
}

TEST(GpuNcclGroup, OneRankPerGpu) {
  if (!nccl_available()) GTEST_SKIP() << "this build has no NCCL/RCCL";
  const std::vector<Device> devices = ops::gpu_devices();
  if (devices.size() < 2) GTEST_SKIP() << "one GPU: the several-GPU case needs a machine with two or more";
  NcclGroup group(devices);
  check_collectives(devices, [&](int r) -> Communicator& { return group.communicator(r); },
                    [&](int r, const std::string& why) { group.abort(r, why); });
  test::expect_error_containing([&] { NcclGroup twice(std::vector<Device>{gpu(0), gpu(0)}); }, "named twice");
}

TEST(GpuNcclGroup, TheWatchdogEndsACollectiveThatARankNeverJoins) {
  // Rank 1 never joins rank 0's all-gather: rank 0's wait for its device would last for ever (NCCL's
  // kernel spins). The watchdog sees no exchange for its timeout and aborts the group.
  // NOT YET WORKING: on two H200s (2026-11-26) ncclCommAbort of these blocking communicators did not end
  // the spinning all-gather, and this test hung until it was killed. NCCL's and RCCL's fault tolerance
  // needs non-blocking communicators (ncclCommInitRankConfig, config.blocking = 0); until the group makes
  // those, the test runs only when asked, so that it does not hang the suite.
  if (std::getenv("HD_TEST_NCCL_WATCHDOG") == nullptr)
    GTEST_SKIP() << "hangs with blocking NCCL communicators: set HD_TEST_NCCL_WATCHDOG=1 to run it";
  if (!nccl_available()) GTEST_SKIP() << "this build has no NCCL/RCCL";
  const std::vector<Device> all = ops::gpu_devices();
  if (all.size() < 2) GTEST_SKIP() << "one GPU: the several-GPU case needs a machine with two or more";
  const std::vector<Device> devices = {all[0], all[1]};
  NcclGroup group(devices);
  const auto activity = [&] { return group.communicator(0).activity() + group.communicator(1).activity(); };
  const auto start = std::chrono::steady_clock::now();
  test::expect_error_containing(
      [&] {
        run_ranks(2, [&](int rank) {
          if (rank == 1) return;
          OwnedTensor in(Shape{2, 64}, DType::kF16, devices[0]), out(Shape{4, 64}, DType::kF16, devices[0]);
          group.communicator(0).all_gather(in, out);
          ops::synchronize(devices[0]);
        }, [&](int rank, const std::string& why) { group.abort(rank, why); },
                  Watchdog{activity, std::chrono::seconds(2)});
      },
      "no progress in 2 s");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(60));
  OwnedTensor in(Shape{2, 64}, DType::kF16, devices[0]), out(Shape{4, 64}, DType::kF16, devices[0]);
  test::expect_error_containing([&] { group.communicator(0).all_gather(in, out); }, "group aborted: no progress");
}

TEST(GpuInProcessGroup, LogicalRanksOfOneGpuCopyOnTheDevice) {
  for (int n : {2, 4}) {
    SCOPED_TRACE(n);
    const std::vector<Device> devices(size_t(n), gpu(0));
    InProcessGroup group(n);
    std::vector<std::unique_ptr<Communicator>> comms;
    for (int r = 0; r < n; ++r) comms.push_back(group.communicator(r, gpu(0)));
    check_collectives(devices, [&](int r) -> Communicator& { return *comms[size_t(r)]; },
                      [&](int r, const std::string& why) { group.fail(r, why); });
  }
}

}  // namespace
}  // namespace hd::comm
