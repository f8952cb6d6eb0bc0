// Several bias-free linear maps of one input (an attention's query, key and value projections) computed
// as one product. Their weights are stacked [parts · out, in] at load, so one GEMM of parts · out columns
// replaces several narrow ones: at SD1.5's 16x16 level each of the three self-attention projections
// (512 x 1280 <- 1280) filled 40 of an H100's 132 multiprocessors with 128-row tiles (2026-11-27). The
// outputs are column ranges of one [.., parts · out] tensor, which attention reads in place (its tokens
// are rows, ops::attention). Weights a caller holds (held_component) stay a product each, since stacking
// them would copy the caller's memory.
#pragma once

#include <string>
#include <vector>

#include "core/tensor.h"
#include "models/weights.h"

namespace hd {

class StackedLinear {
 public:
  // Each of `names` (".weight" appended) is [out, in].
  static StackedLinear load(const WeightReader& w, const std::vector<std::string>& names, int64_t out,
                            int64_t in);

  size_t parts() const { return parts_; }
  // Map i's weight [out, in]: a row range of the stacked weight, or its own.
  Tensor weight(size_t i) const;

  // Each map of x [.., in], in order: views [.., out] into `storage` (one stacked tensor, or one each).
  struct Outputs {
    std::vector<OwnedTensor> storage;
    std::vector<Tensor> parts;
  };
  Outputs operator()(const Tensor& x) const;

 private:
  std::vector<OwnedTensor> weights_;  // one [parts · out, in], or one [out, in] a part
  size_t parts_ = 0;
  int64_t out_ = 0;
};

}  // namespace hd
