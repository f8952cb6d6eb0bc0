#include "comm/strip_ranks.h"

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "comm/in_process_group.h"
#include "comm/rank_threads.h"
#include "ops/ops.h"

namespace hd::test {

void on_strips(int ranks, const std::function<void(int rank, comm::ImageSplit& split)>& work) {
  comm::InProcessGroup group(ranks, std::chrono::seconds(120));
  std::vector<std::unique_ptr<comm::Communicator>> comms;
  for (int r = 0; r < ranks; ++r) comms.push_back(group.communicator(r));
  comm::run_ranks(ranks, [&](int rank) {
    comm::ImageSplit split(*comms[size_t(rank)]);
    work(rank, split);
  }, [&](int rank, const std::string& why) { group.fail(rank, why); });
}

OwnedTensor rows_of(const Tensor& x, int64_t first, int64_t rows) {
  const Tensor view = x.slice(1, first, rows);
  OwnedTensor out(view.shape, view.dtype);
  ops::copy(view, out);
  return out;
}

}  // namespace hd::test
