// Front half of attention: argument checks, then the device's kernel.
#include "ops/cpu/cpu_ops.h"
#include "ops/op_checks.h"
#include "ops/ops.h"
#include "ops/profiler.h"
#if defined(HD_WITH_GPU)
#include "ops/gpu/gpu_ops.h"
#endif

namespace hd::ops {

void attention(const Tensor& q, const Tensor& k, const Tensor& v, AttentionParams p, const Tensor& out,
               const Tensor* lse) {
  const OpScope scope("attention", q.device);
  const Device& dev = q.device;
  // The query, key and value may be column ranges of wider rows (one stacked projection's output).
  for (const auto& [what, t] : {std::pair{"query", &q}, {"key", &k}, {"value", &v}, {"output", &out}}) {
    check_rank("attention", what, *t, 3);
    t == &out ? check_operand("attention", what, *t, dev) : check_rows("attention", what, *t, dev);
  }
  HD_CHECK(p.heads >= 1 && q.dim(2) % p.heads == 0, "attention: width ", q.dim(2), " of query ",
           q.shape.to_string(), " is not divisible into ", p.heads, " heads");
  check_shape("attention", "key", k, Shape{q.dim(0), k.dim(1), q.dim(2)});
  check_shape("attention", "value", v, k.shape);
  check_shape("attention", "output", out, q.shape);
  HD_CHECK(k.dim(1) > 0 || q.dim(1) == 0, "attention: no keys for ", q.dim(1), " queries");
  for (const Tensor* t : {&k, &v, &out})
    HD_CHECK(t->dtype == q.dtype, "attention: query is ", dtype_name(q.dtype), " but ", t->describe(), " is not");
  if (lse != nullptr) check_log_sum_exp("attention", *lse, q, p.heads);
  if (dev.is_cpu()) return cpu::attention(q, k, v, p, out, lse);
#if defined(HD_WITH_GPU)
  gpu::attention(q, k, v, p.heads, p.causal, p.scale, out, gpu::KernelPath::kTuned, lse);
#else
  no_kernel("attention", dev);
#endif
}

}  // namespace hd::ops
