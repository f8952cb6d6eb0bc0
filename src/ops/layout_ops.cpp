// Front half of the layout ops and the timestep embedding.
#include <cmath>

#include "ops/cpu/cpu_ops.h"
#include "ops/op_checks.h"
#include "ops/ops.h"
#include "ops/profiler.h"
#if defined(HD_WITH_GPU)
#include "ops/gpu/gpu_ops.h"
#endif

namespace hd::ops {

void upsample_nearest_2x(const Tensor& x, const Tensor& out) {
  const OpScope scope("upsample_nearest_2x", x.device);
  check_operand("upsample_nearest_2x", "input", x, x.device);
  check_operand("upsample_nearest_2x", "output", out, x.device);
  check_rank("upsample_nearest_2x", "input", x, 4);
  check_shape("upsample_nearest_2x", "output", out, Shape{x.dim(0), 2 * x.dim(1), 2 * x.dim(2), x.dim(3)});
  if (x.device.is_cpu()) return cpu::upsample_nearest_2x(x, out);
#if defined(HD_WITH_GPU)
  gpu::upsample_nearest_2x(x, out);
#else
  no_kernel("upsample_nearest_2x", x.device);
#endif
}

void concat_channels(const Tensor& a, const Tensor& b, const Tensor& out) {
  const OpScope scope("concat_channels", a.device);
  check_operand("concat_channels", "a", a, a.device);
  check_operand("concat_channels", "b", b, a.device);
  check_operand("concat_channels", "output", out, a.device);
  HD_CHECK(a.rank() >= 1 && a.rank() == b.rank(), "concat_channels: cannot concatenate ", a.shape.to_string(),
           " and ", b.shape.to_string());
  Shape expected = a.shape;
  for (int i = 0; i + 1 < a.rank(); ++i) {
    HD_CHECK(a.shape[i] == b.shape[i], "concat_channels: shapes ", a.shape.to_string(), " and ",
             b.shape.to_string(), " differ outside the channel dimension");
  }
  expected[a.rank() - 1] = a.dim(-1) + b.dim(-1);
  check_shape("concat_channels", "output", out, expected);
  if (a.device.is_cpu()) return cpu::concat_channels(a, b, out);
#if defined(HD_WITH_GPU)
  gpu::concat_channels(a, b, out);
#else
  no_kernel("concat_channels", a.device);
#endif
}

void surround_strip(const Tensor& x, const Tensor* above, const Tensor* below, const Tensor& out) {
  const OpScope scope("surround_strip", x.device);
  check_operand("surround_strip", "strip", x, x.device);
  check_operand("surround_strip", "output", out, x.device);
  check_rank("surround_strip", "strip", x, 4);
  const int64_t n = x.dim(0), h = x.dim(1), w = x.dim(2), c = x.dim(3);
  check_shape("surround_strip", "output", out, Shape{n, h + 2, w + 2, c});
  for (const Tensor* row : {above, below}) {
    if (row == nullptr) continue;
    HD_CHECK(row->shape == (Shape{n, 1, w, c}) && row->dtype == x.dtype && row->device == x.device &&
                 row->strides[2] == c && row->strides[3] == 1,
             "surround_strip: a row ", row->describe(), " must be ", dtype_name(x.dtype), Shape{n, 1, w, c}.to_string(),
             " with dense pixels, on ", x.device.to_string());
  }
  if (x.device.is_cpu()) return cpu::surround_strip(x, above, below, out);
#if defined(HD_WITH_GPU)
  gpu::surround_strip(x, above, below, out);
#else
  no_kernel("surround_strip", x.device);
#endif
}

void embedding(const Tensor& ids, const Tensor& table, const Tensor& out) {
  const OpScope scope("embedding", table.device);
  HD_CHECK(ids.dtype == DType::kI32, "embedding: ids are ", dtype_name(ids.dtype), ", expected i32");
  HD_CHECK(ids.device == table.device && ids.is_contiguous(), "embedding: ids must be dense and on the table's device");
  check_operand("embedding", "table", table, table.device);
  check_operand("embedding", "output", out, table.device);
  check_rank("embedding", "table", table, 2);
  Shape expected = ids.shape;
  expected.push_back(table.dim(1));
  check_shape("embedding", "output", out, expected);
  if (table.device.is_cpu()) return cpu::embedding(ids, table, out);
#if defined(HD_WITH_GPU)
  gpu::embedding(ids, table, out);
#else
  no_kernel("embedding", table.device);
#endif
}

void timestep_embedding(const Tensor& timesteps, TimestepEmbeddingParams p, const Tensor& out) {
  const OpScope scope("timestep_embedding", out.device);
  check_operand("timestep_embedding", "timesteps", timesteps, timesteps.device);
  check_operand("timestep_embedding", "output", out, timesteps.device);
  check_rank("timestep_embedding", "timesteps", timesteps, 1);
  check_rank("timestep_embedding", "output", out, 2);
  HD_CHECK(out.dim(0) == timesteps.dim(0) && out.dim(1) >= 2, "timestep_embedding: output ",
           out.shape.to_string(), " does not fit ", timesteps.dim(0), " timesteps");
  HD_CHECK(std::isfinite(p.max_period) && p.max_period > 0 && float(out.dim(1) / 2) != p.downscale_freq_shift,
           "timestep_embedding: max_period must be positive and downscale_freq_shift differ from dim/2");
  if (timesteps.device.is_cpu()) return cpu::timestep_embedding(timesteps, p, out);
#if defined(HD_WITH_GPU)
  gpu::timestep_embedding(timesteps, p, out);
#else
  no_kernel("timestep_embedding", timesteps.device);
#endif
}

}  // namespace hd::ops
