// The checks and counts every communicator shares; the exchanges are its implementation's.
#include "comm/communicator.h"

#include "core/error.h"

namespace hd::comm {

Communicator::Communicator(int rank, int size, Device device) : rank_(rank), size_(size), device_(device) {
  HD_CHECK(size >= 1 && rank >= 0 && rank < size, "a communicator's rank ", rank, " is outside a group of ", size);
}

void Communicator::check_operand(const char* op, const char* what, const Tensor& t) const {
  HD_CHECK(t.data != nullptr || t.numel() == 0, op, ": the ", what, " has no memory");
  HD_CHECK(t.is_contiguous(), op, ": the ", what, " ", t.describe(), " is not dense");
  HD_CHECK(t.device == device_, op, ": the ", what, " ", t.describe(), " is not on rank ", rank_, "'s device ",
           device_.to_string());
}

void Communicator::check_peer(const char* op, int peer) const {
  HD_CHECK(peer >= 0 && peer < size_ && peer != rank_, op, ": rank ", rank_, " of ", size_,
           " cannot exchange with rank ", peer);
}

void Communicator::all_gather(const Tensor& in, const Tensor& out) {
  check_operand("all_gather", "input", in);
  check_operand("all_gather", "output", out);
  Shape expected = in.shape;
  HD_CHECK(in.rank() >= 1, "all_gather: the input ", in.describe(), " has no first dimension");
  expected[0] = in.dim(0) * size_;
  HD_CHECK(out.dtype == in.dtype && out.shape == expected, "all_gather: the output ", out.describe(),
           " must be ", dtype_name(in.dtype), expected.to_string(), " (", size_, " ranks' ", in.shape.to_string(), ")");
  all_gather_impl(in, out);
  count({uint64_t(size_ - 1) * in.nbytes(), uint64_t(size_ - 1) * in.nbytes(), 1});
}

void Communicator::all_reduce_sum(const Tensor& inout) {
  check_operand("all_reduce_sum", "tensor", inout);
  HD_CHECK(inout.dtype == DType::kF32 || inout.dtype == DType::kF16 || inout.dtype == DType::kBF16,
           "all_reduce_sum: ", inout.describe(), " is not f32, f16 or bf16");
  all_reduce_sum_impl(inout);
  const uint64_t ring = 2 * uint64_t(size_ - 1) * inout.nbytes() / uint64_t(size_);
  count({ring, ring, 1});
}

void Communicator::send(const Tensor& t, int peer) {
  check_operand("send", "tensor", t);
  check_peer("send", peer);
  send_impl(t, peer);
  count({t.nbytes(), 0, 1});
}

void Communicator::receive(const Tensor& t, int peer) {
  check_operand("receive", "tensor", t);
  check_peer("receive", peer);
  receive_impl(t, peer);
  count({0, t.nbytes(), 1});
}

void Communicator::count_replay(const ExchangeCounts& replayed) { count(replayed); }

void Communicator::count(const ExchangeCounts& exchanged) {
  counts_.bytes_sent += exchanged.bytes_sent;
  counts_.bytes_received += exchanged.bytes_received;
  counts_.collectives += exchanged.collectives;
  activity_.fetch_add(1, std::memory_order_relaxed);
}

void Communicator::barrier() {
  barrier_impl();
  count({0, 0, 1});
}

}  // namespace hd::comm
