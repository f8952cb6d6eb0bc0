// Broadcasting binary ops and scaling on the CPU.
#include <functional>

#include "core/thread_pool.h"
#include "ops/cpu/cpu_ops.h"

namespace hd::ops::cpu {

namespace {

// Strides of `t` when broadcast to `shape` (right-aligned; broadcast dims get stride 0).
Shape broadcast_strides(const Tensor& t, const Shape& shape) {
  Shape s = Shape::of_rank(shape.rank());
  const int offset = shape.rank() - t.rank();
  for (int i = 0; i < t.rank(); ++i) s[offset + i] = t.shape[i] == 1 ? 0 : t.strides[i];
  return s;
}

template <typename F>
void broadcast_apply(const Tensor& a, const Tensor& b, const Tensor& out, F f) {
  const float* ap = a.ptr<float>();
  const float* bp = b.ptr<float>();
  float* yp = out.ptr<float>();
  const int64_t total = out.numel();
  if (a.shape == out.shape && b.shape == out.shape) {  // the common case: no index arithmetic
    ThreadPool::global().parallel_for(total, 1 << 14, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) yp[i] = f(ap[i], bp[i]);
    });
    return;
  }
  const Shape& shape = out.shape;
  const int rank = shape.rank();
  const Shape sa = broadcast_strides(a, shape), sb = broadcast_strides(b, shape);
  const int64_t inner = rank ? shape[rank - 1] : 1;
  const int64_t outer = inner == 0 ? 0 : total / inner;
  ThreadPool::global().parallel_for(outer, 64, [&](int64_t begin, int64_t end) {
    for (int64_t o = begin; o < end; ++o) {
      int64_t ia = 0, ib = 0, rest = o;
      for (int d = rank - 2; d >= 0; --d) {
        const int64_t idx = rest % shape[d];
        rest /= shape[d];
        ia += idx * sa[d];
        ib += idx * sb[d];
      }
      const int64_t ia_step = rank ? sa[rank - 1] : 0, ib_step = rank ? sb[rank - 1] : 0;
      float* y = yp + o * inner;
      for (int64_t j = 0; j < inner; ++j) y[j] = f(ap[ia + j * ia_step], bp[ib + j * ib_step]);
    }
  });
}

}  // namespace

void binary(const Tensor& a, const Tensor& b, BinaryOp op, const Tensor& out) {
  if (op == BinaryOp::kAdd) return broadcast_apply(a, b, out, std::plus<float>());
  broadcast_apply(a, b, out, std::multiplies<float>());
}

void scale(const Tensor& x, float factor, const Tensor& out) {
  const float* xp = x.ptr<float>();
  float* yp = out.ptr<float>();
  ThreadPool::global().parallel_for(x.numel(), 1 << 14, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) yp[i] = xp[i] * factor;
  });
}

}  // namespace hd::ops::cpu
