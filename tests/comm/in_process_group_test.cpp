// The in-process group at 1, 2 and 4 ranks: what each collective leaves on every rank, the counts, and
// the errors that end a group instead of hanging it (a rank failing, a rank calling another collective,
// tensors that do not match, a rank that never comes).
#include "comm/in_process_group.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "comm/rank_threads.h"
#include "core/error.h"
#include "test_util.h"

namespace hd::comm {
namespace {

using namespace std::chrono_literals;

// Runs work(rank, communicator) on every rank of a fresh group; failures end the group.
void on_ranks(int ranks, const std::function<void(int, Communicator&)>& work,
              std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
  InProcessGroup group(ranks, timeout);
  std::vector<std::unique_ptr<Communicator>> comms;
  for (int r = 0; r < ranks; ++r) comms.push_back(group.communicator(r));
  run_ranks(ranks, [&](int rank) { work(rank, *comms[size_t(rank)]); },
            [&](int rank, const std::string& why) { group.fail(rank, why); });
}

// [rows, 3] filled with rank * 100 + index.
OwnedTensor numbered(int rank, int64_t rows) {
  OwnedTensor t(Shape{rows, 3}, DType::kF32);
  for (int64_t i = 0; i < rows * 3; ++i) t.ptr<float>()[i] = float(rank * 100 + i);
  return t;
}

TEST(InProcessGroup, AllGatherPutsEveryRanksRowsInRankOrder) {
  for (int ranks : {1, 2, 4}) {
    SCOPED_TRACE(ranks);
    on_ranks(ranks, [&](int rank, Communicator& c) {
      const OwnedTensor in = numbered(rank, 2);
      OwnedTensor out = test::poisoned_tensor(Shape{2 * ranks, 3});
      c.all_gather(in, out);
      for (int r = 0; r < ranks; ++r)
        for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(out.ptr<float>()[r * 6 + i], float(r * 100 + i));
      const uint64_t piece = 2 * 3 * 4;
      EXPECT_EQ(c.counts().bytes_sent, uint64_t(ranks - 1) * piece);
      EXPECT_EQ(c.counts().bytes_received, uint64_t(ranks - 1) * piece);
      EXPECT_EQ(c.counts().collectives, 1u);
    });
  }
}

TEST(InProcessGroup, AllReduceSumsInTheSameOrderOnEveryRank) {
  test::Rng rng;
  HD_SEED_TRACE(rng);
  for (int ranks : {2, 4}) {
    SCOPED_TRACE(ranks);
    std::vector<OwnedTensor> inputs;
    for (int r = 0; r < ranks; ++r) inputs.push_back(test::random_tensor(rng, Shape{5, 7}));
    std::vector<double> sum(35, 0.0);
    for (const OwnedTensor& t : inputs)
      for (size_t i = 0; i < 35; ++i) sum[i] += double(t.ptr<float>()[i]);
    std::vector<std::vector<float>> results(static_cast<size_t>(ranks));
    on_ranks(ranks, [&](int rank, Communicator& c) {
      c.all_reduce_sum(inputs[size_t(rank)]);
      results[size_t(rank)] = test::to_vector(inputs[size_t(rank)]);
    });
    for (size_t i = 0; i < 35; ++i) EXPECT_NEAR(results[0][i], sum[i], 1e-5);
    for (int r = 1; r < ranks; ++r) EXPECT_EQ(results[size_t(r)], results[0]) << "rank " << r;
  }
}

TEST(InProcessGroup, AllReduceOfHalfPrecisionSumsInF32) {
  // 2048 + 1 + 1 + 1: summed in f16 each 2049 rounds back to 2048 (f16's spacing there is 2); summed in
  // f32, 2051 rounds once, to 2052.
  on_ranks(4, [](int rank, Communicator& c) {
    OwnedTensor x(Shape{1}, DType::kF16);
    x.ptr<Half>()[0] = float_to_half(rank == 0 ? 2048.0f : 1.0f);
    c.all_reduce_sum(x);
    EXPECT_EQ(half_to_float(x.ptr<Half>()[0]), 2052.0f);
  });
}

TEST(InProcessGroup, SendAndReceiveAroundARing) {
  on_ranks(4, [](int rank, Communicator& c) {
    const int next = (rank + 1) % 4, previous = (rank + 3) % 4;
    const OwnedTensor mine = numbered(rank, 1);
    OwnedTensor got = test::poisoned_tensor(Shape{1, 3});
    // Even ranks send first, odd ranks receive first: every send is synchronous.
    if (rank % 2 == 0) {
      c.send(mine, next);
      c.receive(got, previous);
    } else {
      c.receive(got, previous);
      c.send(mine, next);
    }
    for (int64_t i = 0; i < 3; ++i) EXPECT_EQ(got.ptr<float>()[i], float(previous * 100 + i));
    EXPECT_EQ(c.counts().bytes_sent, 12u);
    EXPECT_EQ(c.counts().bytes_received, 12u);
  });
}

TEST(InProcessGroup, BarrierHoldsEveryRankUntilAllArrive) {
  std::atomic<int> arrived{0};
  on_ranks(4, [&](int rank, Communicator& c) {
    if (rank == 3) std::this_thread::sleep_for(50ms);
    arrived.fetch_add(1);
    c.barrier();
    EXPECT_EQ(arrived.load(), 4);
  });
}

TEST(InProcessGroup, ARankThatFailsEndsTheOthersWithItsName) {
  test::expect_error_containing(
      [] {
        on_ranks(3, [](int rank, Communicator& c) {
          if (rank == 2) throw Error(ErrorKind::kRuntime, "out of paint");
          c.barrier();  // ranks 0 and 1 would wait for ever without the failure
        });
      },
      "out of paint");
  // The others' errors name the failed rank.
  InProcessGroup group(2, 60s);
  auto c0 = group.communicator(0);
  group.fail(1, "the device fell off the bus");
  test::expect_error_containing([&] { c0->barrier(); }, "rank 1 failed: the device fell off the bus");
}

TEST(InProcessGroup, RanksCallingDifferentCollectivesGetAnError) {
  test::expect_error_containing(
      [] {
        on_ranks(2, [](int rank, Communicator& c) {
          OwnedTensor x = numbered(rank, 1), both(Shape{2, 3}, DType::kF32);
          if (rank == 0) c.all_gather(x, both);
          else c.all_reduce_sum(x);
        });
      },
      "called all_");
  test::expect_error_containing(
      [] {
        on_ranks(2, [](int rank, Communicator& c) {
          OwnedTensor x = numbered(rank, rank + 1), all(Shape{2 * (rank + 1), 3}, DType::kF32);
          c.all_gather(x, all);
        });
      },
      "collective #1");
  test::expect_error_containing(
      [] {
        on_ranks(2, [](int rank, Communicator& c) {
          OwnedTensor x = numbered(rank, rank + 1);
          if (rank == 0) c.send(x, 1);
          else c.receive(x, 0);
        });
      },
      "where rank 1 receives");
}

TEST(InProcessGroup, ARankThatNeverComesEndsTheWaitAfterTheTimeout) {
  const auto start = std::chrono::steady_clock::now();
  test::expect_error_containing(
      [] {
        on_ranks(
            2, [](int rank, Communicator& c) { if (rank == 0) c.barrier(); }, 200ms);
      },
      "gave up");
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  // A receive with nobody sending, too.
  InProcessGroup group(2, 100ms);
  auto c1 = group.communicator(1);
  OwnedTensor x(Shape{1}, DType::kF32);
  test::expect_error_containing([&] { c1->receive(x, 0); }, "a tensor from rank 0");
}

TEST(InProcessGroup, OperandsAreCheckedBeforeAnyExchange) {
  InProcessGroup group(2, 100ms);
  auto c = group.communicator(0);
  OwnedTensor x(Shape{2, 3}, DType::kF32), wrong(Shape{3, 3}, DType::kF32), ints(Shape{2}, DType::kI32);
  test::expect_error_containing([&] { c->all_gather(x, wrong); }, "must be f32[4, 3]");
  test::expect_error_containing([&] { c->all_gather(x.view().slice(1, 0, 2), wrong); }, "is not dense");
  test::expect_error_containing([&] { c->all_reduce_sum(ints); }, "is not f32, f16 or bf16");
  test::expect_error_containing([&] { c->send(x, 0); }, "cannot exchange with rank 0");
  test::expect_error_containing([&] { c->receive(x, 2); }, "cannot exchange with rank 2");
  test::expect_error_containing([&] { (void)group.communicator(0); }, "already made");
  test::expect_error_containing([&] { (void)group.communicator(2); }, "outside an in-process group of 2");
  test::expect_error_containing([] { InProcessGroup none(0); }, "1 to 64 ranks");
}

}  // namespace
}  // namespace hd::comm
