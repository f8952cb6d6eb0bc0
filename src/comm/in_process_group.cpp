// The in-process group: each collective is a rendezvous of every rank's post (the views of its tensors)
// under one mutex, then each rank reads the others' posts through ops::copy, then a second rendezvous
// after which no rank reads a post any more, so its owner may change it. Point to point is a mailbox per
// (sender, receiver) pair; a send waits until its letter has been read.
#include "comm/in_process_group.h"

#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <vector>

#include "core/error.h"
#include "ops/ops.h"
#include "ops/placement.h"

namespace hd::comm {

namespace {

enum class Op { kAllGather, kAllReduce, kBarrier };

const char* op_name(Op op) {
  switch (op) {
    case Op::kAllGather: return "all_gather";
    case Op::kAllReduce: return "all_reduce_sum";
    case Op::kBarrier: return "barrier";
  }
  return "?";
}

struct Post {
  Op op = Op::kBarrier;
  Tensor tensor;  // all_gather's input, all_reduce's tensor
};

struct Letter {
  Tensor tensor;
  uint64_t number = 0;
};

}  // namespace

struct InProcessGroup::State {
  int ranks = 0;
  std::chrono::milliseconds timeout{};
  std::mutex m;
  std::condition_variable cv;
  std::vector<Post> posts;
  std::vector<uint64_t> collective_number;  // each rank's count of collectives begun
  int arrived = 0;
  uint64_t generation = 0;
  std::optional<std::string> failure;
  std::vector<std::deque<Letter>> mail;  // [from * ranks + to]
  std::vector<uint64_t> sent, read;       // letters per mailbox
  std::vector<bool> handed_out;

  void throw_if_failed() const {
    if (failure) throw Error(ErrorKind::kRuntime, *failure);
  }
  // Waits under `lock` until done(); a failure or the timeout ends the wait with an error (a timeout
  // fails the group, so that the others stop waiting too).
  template <typename Done>
  void wait(std::unique_lock<std::mutex>& lock, int rank, const std::string& what, Done done) {
    const bool in_time = cv.wait_for(lock, timeout, [&] { return failure.has_value() || done(); });
    throw_if_failed();
    if (!in_time) {
      failure = str_cat("rank ", rank, " waited ", timeout.count() / 1000.0, " s for ", what, " and gave up");
      cv.notify_all();
      throw Error(ErrorKind::kRuntime, *failure);
    }
  }
  // Every rank's arrival: the last one opens the next generation.
  void rendezvous(std::unique_lock<std::mutex>& lock, int rank, const std::string& what) {
    const uint64_t mine = generation;
    if (++arrived == ranks) {
      arrived = 0;
      ++generation;
      cv.notify_all();
      return;
    }
    wait(lock, rank, str_cat("every rank at ", what), [&] { return generation != mine; });
  }
  void fail(const std::string& why) {
    const std::lock_guard<std::mutex> lock(m);
    if (!failure) failure = why;
    cv.notify_all();
  }
};

namespace {

class InProcessCommunicator final : public Communicator {
 public:
  InProcessCommunicator(std::shared_ptr<InProcessGroup::State> state, int rank, const Device& device)
      : Communicator(rank, state->ranks, device), state_(std::move(state)) {}

  std::string describe() const override {
    return str_cat("in-process group, rank ", rank(), " of ", size(), " on ", device().to_string());
  }

 protected:
  void all_gather_impl(const Tensor& in, const Tensor& out) override {
    const std::vector<Post> posts = exchange(Op::kAllGather, in);
    for (int r = 0; r < size(); ++r)
      ops::copy(posts[size_t(r)].tensor, out.slice(0, r * in.dim(0), in.dim(0)));
    finish("all_gather");
  }

  void all_reduce_sum_impl(const Tensor& inout) override {
    const std::vector<Post> posts = exchange(Op::kAllReduce, inout);
    // Summed in f32 in rank order on every rank, so that every rank holds the same numbers.
    const ops::Placement f32{device(), DType::kF32};
    OwnedTensor sum = ops::place(posts[0].tensor, f32), term;
    for (int r = 1; r < size(); ++r) {
      term = ops::place(posts[size_t(r)].tensor, f32);
      ops::add(sum, term, sum);
    }
    finish("all_reduce_sum");  // nobody reads inout any more: it may be written
    if (inout.dtype == DType::kF32) ops::copy(sum, inout);
    else ops::convert(sum, inout);
    ops::synchronize(device());
  }

  void send_impl(const Tensor& t, int peer) override {
    ops::synchronize(device());  // the receiver reads it through its own copies
    State& s = *state_;
    std::unique_lock<std::mutex> lock(s.m);
    s.throw_if_failed();
    const size_t box = size_t(rank() * size() + peer);
    const uint64_t number = ++s.sent[box];
    s.mail[box].push_back(Letter{t, number});
    s.cv.notify_all();
    s.wait(lock, rank(), str_cat("rank ", peer, " to receive ", t.describe()), [&] { return s.read[box] >= number; });
  }

  void receive_impl(const Tensor& t, int peer) override {
    State& s = *state_;
    std::unique_lock<std::mutex> lock(s.m);
    const size_t box = size_t(peer * size() + rank());
    s.wait(lock, rank(), str_cat("a tensor from rank ", peer), [&] { return !s.mail[box].empty(); });
    const Letter letter = s.mail[box].front();
    if (letter.tensor.shape != t.shape || letter.tensor.dtype != t.dtype) {
      s.failure = str_cat("rank ", peer, " sent ", letter.tensor.describe(), " where rank ", rank(), " receives ",
                          t.describe());
      s.cv.notify_all();
      s.throw_if_failed();
    }
    ops::copy(letter.tensor, t);
    ops::synchronize(device());
    s.mail[box].pop_front();
    ++s.read[box];
    s.cv.notify_all();
  }

  void barrier_impl() override {
    exchange(Op::kBarrier, Tensor{});
    finish("barrier");
  }

 private:
  using State = InProcessGroup::State;

  // Posts this rank's tensor and returns every rank's post once all have posted, each checked to be the
  // same collective with a matching tensor.
  std::vector<Post> exchange(Op op, const Tensor& t) {
    ops::synchronize(device());  // what the others will read has been computed
    State& s = *state_;
    std::unique_lock<std::mutex> lock(s.m);
    s.throw_if_failed();
    const uint64_t number = ++s.collective_number[size_t(rank())];
    s.posts[size_t(rank())] = Post{op, t};
    s.rendezvous(lock, rank(), str_cat(op_name(op), " #", number));
    const std::vector<Post> posts = s.posts;
    lock.unlock();
    for (int r = 0; r < size(); ++r) {
      const Post& p = posts[size_t(r)];
      const bool same = p.op == op && p.tensor.shape == t.shape && p.tensor.dtype == t.dtype;
      if (!same) {
        const std::string why = str_cat("collective #", number, ": rank ", rank(), " called ", op_name(op), " on ",
                                        t.describe(), ", rank ", r, " ", op_name(p.op), " on ", p.tensor.describe());
        s.fail(why);
        throw Error(ErrorKind::kInvalidInput, why);
      }
    }
    return posts;
  }

  // The second rendezvous: every rank has read the posts.
  void finish(const char* op) {
    ops::synchronize(device());
    State& s = *state_;
    std::unique_lock<std::mutex> lock(s.m);
    s.rendezvous(lock, rank(), str_cat("the end of ", op));
  }

  std::shared_ptr<State> state_;
};

}  // namespace

InProcessGroup::InProcessGroup(int ranks, std::chrono::milliseconds timeout) : state_(std::make_shared<State>()) {
  HD_CHECK(ranks >= 1 && ranks <= 64, "an in-process group has 1 to 64 ranks, not ", ranks);
  HD_CHECK(timeout.count() > 0, "an in-process group's timeout must be positive");
  State& s = *state_;
  s.ranks = ranks;
  s.timeout = timeout;
  s.posts.resize(size_t(ranks));
  s.collective_number.resize(size_t(ranks));
  s.mail.resize(size_t(ranks * ranks));
  s.sent.resize(size_t(ranks * ranks));
  s.read.resize(size_t(ranks * ranks));
  s.handed_out.resize(size_t(ranks));
}

int InProcessGroup::size() const { return state_->ranks; }

std::unique_ptr<Communicator> InProcessGroup::communicator(int rank, const Device& device) {
  State& s = *state_;
  const std::lock_guard<std::mutex> lock(s.m);
  HD_CHECK(rank >= 0 && rank < s.ranks, "rank ", rank, " is outside an in-process group of ", s.ranks);
  HD_CHECK(!s.handed_out[size_t(rank)], "rank ", rank, "'s communicator was already made");
  s.handed_out[size_t(rank)] = true;
  return std::make_unique<InProcessCommunicator>(state_, rank, device);
}

void InProcessGroup::fail(int rank, const std::string& why) {
  state_->fail(rank < 0 ? why : str_cat("rank ", rank, " failed: ", why));
}

}  // namespace hd::comm
