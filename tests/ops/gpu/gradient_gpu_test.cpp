// The GPU gradients of GroupNorm(+SiLU), LayerNorm and GEGLU against the CPU's (ops/cpu/*_backward.cpp,
// themselves checked against finite differences) on fresh random data, in f32, f16 and bf16, the inputs
// rounded to the dtype for the reference; and attention's (attention_backward.cu) in f16 and bf16 at SD's
// head widths, self- and cross-attention, causal, odd lengths, on the tensor-core and the portable path,
// with what it does not take refused clearly.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <tuple>

#include "core/error.h"
#include "ops/gpu/gpu_ops.h"
#include "ops/gpu/gpu_test_util.h"
#include "ops/ops.h"
#include "test_util.h"

namespace hd {
namespace {

// The gradients are sums over whole groups and channels: bf16's rounding of the result dominates.
double tolerance(DType t) { return t == DType::kF32 ? 1e-5 : t == DType::kF16 ? 3e-3 : 2e-2; }

void expect_close(const char* what, const Tensor& gpu, const Tensor& cpu_f32, DType t) {
  EXPECT_LE(test::relative_l2(test::to_host_f32(gpu), test::reference_of(cpu_f32)), tolerance(t)) << what;
}

TEST(GpuGroupNormBackward, MatchesCpu) {
  struct Case {
    Shape shape;
    int groups;
  };
  const Case cases[] = {{Shape{2, 16, 16, 320}, 32}, {Shape{1, 7, 5, 30}, 3}, {Shape{2, 77, 40}, 8},
                        {Shape{3, 300, 64}, 2}};
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (const auto& c : cases) {
      for (bool silu : {false, true}) {
        SCOPED_TRACE(testing::Message() << dtype_name(t) << " " << c.shape.to_string() << (silu ? " +silu" : ""));
        test::Rng rng;
        HD_SEED_TRACE(rng);
        const int64_t channels = c.shape[c.shape.rank() - 1];
        const Shape vec{channels};
        const auto x = test::random_tensor(rng, c.shape, 2.f), dz = test::random_tensor(rng, c.shape);
        const auto gamma = test::random_tensor(rng, vec), beta = test::random_tensor(rng, vec);
        const auto dx = test::poisoned_gpu(c.shape, t), dg = test::poisoned_gpu(vec, t), db = test::poisoned_gpu(vec, t);
        ops::group_norm_backward(test::to_gpu(dz, t), test::to_gpu(x, t), test::to_gpu(gamma, t), test::to_gpu(beta, t),
                                 c.groups, 1e-5f, silu, dx, dg, db);
        OwnedTensor ex(c.shape, DType::kF32), eg(vec, DType::kF32), eb(vec, DType::kF32);
        ops::group_norm_backward(test::rounded_to(dz, t), test::rounded_to(x, t), test::rounded_to(gamma, t),
                                 test::rounded_to(beta, t), c.groups, 1e-5f, silu, ex, eg, eb);
        expect_close("dx", dx, ex, t);
        expect_close("dgamma", dg, eg, t);
        expect_close("dbeta", db, eb, t);
      }
    }
  }
}

TEST(GpuLayerNormBackward, MatchesCpu) {
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (const Shape& shape : {Shape{2, 1024, 320}, Shape{3, 77, 768}, Shape{5, 30}}) {
      SCOPED_TRACE(testing::Message() << dtype_name(t) << " " << shape.to_string());
      test::Rng rng;
      HD_SEED_TRACE(rng);
      const Shape vec{shape[shape.rank() - 1]};
      const auto x = test::random_tensor(rng, shape), dz = test::random_tensor(rng, shape);
      const auto gamma = test::random_tensor(rng, vec);
      const auto dx = test::poisoned_gpu(shape, t), dg = test::poisoned_gpu(vec, t), db = test::poisoned_gpu(vec, t);
      ops::layer_norm_backward(test::to_gpu(dz, t), test::to_gpu(x, t), test::to_gpu(gamma, t), 1e-5f, dx, dg, db);
      OwnedTensor ex(shape, DType::kF32), eg(vec, DType::kF32), eb(vec, DType::kF32);
      ops::layer_norm_backward(test::rounded_to(dz, t), test::rounded_to(x, t), test::rounded_to(gamma, t), 1e-5f, ex,
                               eg, eb);
      expect_close("dx", dx, ex, t);
      expect_close("dgamma", dg, eg, t);
      expect_close("dbeta", db, eb, t);
    }
  }
}

TEST(GpuGegluBackward, MatchesCpuForBothGelus) {
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (auto approximation : {ops::GeluApproximation::kNone, ops::GeluApproximation::kTanh}) {
      test::Rng rng;
      HD_SEED_TRACE(rng);
      const auto x = test::random_tensor(rng, Shape{2, 300, 2 * 72}, 2.f);
      const auto dz = test::random_tensor(rng, Shape{2, 300, 72});
      const auto dx = test::poisoned_gpu(x.view().shape, t);
      ops::geglu_backward(test::to_gpu(dz, t), test::to_gpu(x, t), approximation, dx);
      OwnedTensor expected(x.view().shape, DType::kF32);
      ops::geglu_backward(test::rounded_to(dz, t), test::rounded_to(x, t), approximation, expected);
      expect_close("dx", dx, expected, t);
    }
  }
}

TEST(GpuAttentionBackward, MatchesCpu) {
  struct Case {
    int64_t batch, lq, lk;
    int heads, head_dim;
    bool causal;
  };
  // SD1.5's widths 40/80/160 and SD2.x/SDXL's 64; 77 text tokens; lengths off every tile size; 96, the
  // widest head Hopper's warpgroup kernel takes (its dQ tiles at their widest). The last four have few key
  // blocks for their queries: each key block's query steps are split among several blocks
  // (attention_gradient_block), one of them causal; the self-attention ones among them keep dK's and dV's
  // sums after dQ's where the log-sum-exp is given (the fragment kernel's stacked sums).
  const Case cases[] = {{2, 300, 300, 2, 40, false}, {2, 130, 77, 2, 64, false},  {1, 100, 100, 1, 80, true},
                        {1, 70, 90, 2, 160, false},  {1, 33, 50, 3, 8, false},    {1, 200, 200, 2, 64, true},
                        {1, 150, 130, 2, 96, false}, {1, 1000, 77, 2, 40, false}, {1, 700, 700, 1, 64, true},
                        {1, 400, 50, 2, 160, false}, {1, 300, 300, 2, 160, false}};
  for (DType t : {DType::kF16, DType::kBF16}) {
    for (const auto& c : cases) {
      // kTuned: Hopper's warpgroup kernel on an sm_90 device (heads up to 96), else the fragment layer's;
      // kFragments: the fragment layer's tensor-core kernel; kPortable: its portable shuffles.
      for (gpu::KernelPath path :
           {gpu::KernelPath::kTuned, gpu::KernelPath::kFragments, gpu::KernelPath::kPortable}) {
        SCOPED_TRACE(testing::Message()
                     << dtype_name(t) << " B" << c.batch << " Lq" << c.lq << " Lk" << c.lk << " heads "
                     << c.heads << "x" << c.head_dim << (c.causal ? " causal" : "")
                     << (path == gpu::KernelPath::kPortable    ? " portable"
                         : path == gpu::KernelPath::kFragments ? " fragments"
                                                               : ""));
        test::Rng rng;
        HD_SEED_TRACE(rng);
        const int64_t width = int64_t(c.heads) * c.head_dim;
        const Shape qs{c.batch, c.lq, width}, ks{c.batch, c.lk, width};
        // Inputs rounded to the dtype first, so that both sides see the same values.
        const OwnedTensor q = test::rounded_to(test::random_tensor(rng, qs), t);
        const OwnedTensor k = test::rounded_to(test::random_tensor(rng, ks), t);
        const OwnedTensor v = test::rounded_to(test::random_tensor(rng, ks), t);
        const OwnedTensor dz = test::rounded_to(test::random_tensor(rng, qs), t);
        const ops::AttentionParams p{c.heads, c.causal, 0.f};
        OwnedTensor out(qs, DType::kF32);
        ops::attention(q, k, v, p, out);
        const OwnedTensor o = test::rounded_to(out, t);
        OwnedTensor eq(qs, DType::kF32), ek(ks, DType::kF32), ev(ks, DType::kF32);
        ops::attention_backward(dz, q, k, v, o, p, eq, ek, ev);

        // The gradient recomputing the log-sum-exp, and reading the one the GPU's forward wrote.
        const auto gq = test::to_gpu(q, t), gk = test::to_gpu(k, t), gv = test::to_gpu(v, t);
        const auto lse = test::poisoned_gpu(Shape{c.batch, c.heads, c.lq}, DType::kF32);
        gpu::attention(gq, gk, gv, c.heads, c.causal, 0.f, test::poisoned_gpu(qs, t), path, &lse.view());
        for (const bool given : {false, true}) {
          const auto dq = test::poisoned_gpu(qs, t), dk = test::poisoned_gpu(ks, t),
                     dv = test::poisoned_gpu(ks, t);
          gpu::attention_backward(test::to_gpu(dz, t), gq, gk, gv, test::to_gpu(o, t), c.heads, c.causal, 0.f,
                                  dq, dk, dv, path, given ? &lse.view() : nullptr);
          // Probabilities and dS are rounded to the dtype for the matrix products, as in every flash kernel.
          const double tol = t == DType::kF16 ? 5e-3 : 3e-2;
          for (const auto& [what, got, want] :
               {std::tuple{"dq", &dq, &eq}, {"dk", &dk, &ek}, {"dv", &dv, &ev}}) {
            const double err = test::relative_l2(test::to_host_f32(*got), test::reference_of(*want));
            EXPECT_LE(err, tol) << what << (given ? " (the forward's log-sum-exp)" : "");
            if (path == gpu::KernelPath::kTuned && c.head_dim == 64 && !c.causal && !given)
              std::printf("%s %s: %.2e\n", std::string(dtype_name(t)).c_str(), what, err);
          }
        }
      }
    }
  }
}

TEST(GpuAttentionBackward, RefusesWhatItDoesNotTakeClearly) {
  const auto expect_unsupported = [](const Shape& shape, int heads, DType t, const char* text) {
    const auto x = test::poisoned_gpu(shape, t);
    try {
      ops::attention_backward(x, x, x, x, x, {heads, false, 0.f}, x, x, x);
      ADD_FAILURE() << "attention_backward ran for " << shape.to_string();
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
      EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
    }
  };
  expect_unsupported(Shape{1, 4, 8}, 2, DType::kF16, "heads of 4");      // 4-wide heads
  expect_unsupported(Shape{1, 4, 512}, 1, DType::kF16, "heads of 512");  // the VAE's
  expect_unsupported(Shape{1, 4, 64}, 1, DType::kF32, "f16 or bf16");
}

}  // namespace
}  // namespace hd
