// Collectives between the ranks of a group (GPUs, or threads standing in for them): what CFG parallel and
// the image split exchange each step. A GPU rank's collectives are queued on its device's stream (the
// engine's, or a caller's through gpu::ExternalStream), in order with its kernels; a CPU rank's have
// finished when they return. Every rank calls the same collectives in the same order.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "core/tensor.h"

namespace hd::comm {

// What one rank has exchanged so far, as a ring implementation moves it: an all-gather sends and
// receives (ranks - 1) pieces, an all-reduce 2 (ranks - 1) / ranks of the tensor each way.
struct ExchangeCounts {
  uint64_t bytes_sent = 0, bytes_received = 0;
  uint64_t collectives = 0;  // every call, barriers included
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  const Device& device() const { return device_; }
  virtual std::string describe() const = 0;  // "NCCL 2.28.3, rank 0 of 2 on cuda:0"

  // out = every rank's `in` one after the other along dimension 0, in rank order: out.dim(0) =
  // size() * in.dim(0), the other dimensions equal. Dense tensors of one dtype on this rank's device.
  void all_gather(const Tensor& in, const Tensor& out);
  // inout = the element-wise sum of every rank's inout (f32, f16 or bf16; f32 accumulation where the
  // implementation allows).
  void all_reduce_sum(const Tensor& inout);
  // Point to point: `t` to rank `peer`, which receives it into a tensor of the same shape and dtype.
  void send(const Tensor& t, int peer);
  void receive(const Tensor& t, int peer);
  // Returns when every rank has called it, and (GPU) what each queued before it has run.
  void barrier();

  const ExchangeCounts& counts() const { return counts_; }
  // Collectives captured into a graph run again at each replay without calling this object: the graph's
  // owner adds what the capture counted (`replayed`) at each later replay.
  void count_replay(const ExchangeCounts& replayed);
  // How many exchanges this rank has queued (or replayed in a graph) so far; read from any thread: the
  // heartbeat a watchdog watches (comm::Watchdog).
  uint64_t activity() const { return activity_.load(std::memory_order_relaxed); }

 protected:
  Communicator(int rank, int size, Device device);
  virtual void all_gather_impl(const Tensor& in, const Tensor& out) = 0;
  virtual void all_reduce_sum_impl(const Tensor& inout) = 0;
  virtual void send_impl(const Tensor& t, int peer) = 0;
  virtual void receive_impl(const Tensor& t, int peer) = 0;
  virtual void barrier_impl() = 0;

 private:
  void check_operand(const char* op, const char* what, const Tensor& t) const;
  void check_peer(const char* op, int peer) const;
  // Adds what one call (or one replay) exchanged to counts_, and a beat to activity_.
  void count(const ExchangeCounts& exchanged);

  int rank_, size_;
  Device device_;
  ExchangeCounts counts_;
  std::atomic<uint64_t> activity_{0};
};

}  // namespace hd::comm
