// The GPU flash attention against the CPU reference on fresh random data: SD's head dimensions,
// self- and cross-attention, lengths that are not multiples of the tiles, causal masking, f16 and bf16,
// through the tuned path (Hopper's warpgroup kernel on an H100/H200), the fragment layer's matrix units,
// the portable fragment path, and the kernels for AMD's MFMA and WMMA layouts (emulated).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>

#include "core/error.h"
#include "ops/gpu/gpu_ops.h"
#include "ops/gpu/gpu_test_util.h"
#include "ops/ops.h"
#include "test_util.h"

namespace hd {
namespace {

struct Case {
  int batch, heads, lq, lk, head_dim;
  bool causal;
};

// Relative L2 bounds: f16 keeps 11 significant bits, bf16 8; the probabilities are rounded to the
// input type before the second product, as in every flash attention.
double tolerance(DType t) { return t == DType::kF16 ? 2e-3 : 1.2e-2; }

// The GPU result of run(q, k, v, out, lse) on c's random data against the CPU reference; with with_lse
// also each row's log-sum-exp (lse: [B, H, Lq] f32 on the GPU; null without).
template <class Run>
void check_run(const Case& c, DType dtype, const char* label, bool with_lse, Run run) {
  SCOPED_TRACE(testing::Message() << dtype_name(dtype) << label << " B" << c.batch << " H" << c.heads << " Lq"
                                  << c.lq << " Lk" << c.lk << " D" << c.head_dim
                                  << (c.causal ? " causal" : ""));
  test::Rng rng;
  HD_SEED_TRACE(rng);
  const int64_t width = int64_t(c.heads) * c.head_dim;
  const auto q = test::random_tensor(rng, Shape{c.batch, c.lq, width});
  const auto k = test::random_tensor(rng, Shape{c.batch, c.lk, width});
  const auto v = test::random_tensor(rng, Shape{c.batch, c.lk, width});
  const auto dq = test::to_gpu(q, dtype), dk = test::to_gpu(k, dtype), dv = test::to_gpu(v, dtype);
  const auto dout = test::poisoned_gpu(q.view().shape, dtype);
  const Shape lse_shape{c.batch, c.heads, c.lq};
  const auto lse = test::poisoned_gpu(lse_shape, DType::kF32);
  const Tensor lse_view = lse.view();
  run(dq.view(), dk.view(), dv.view(), dout.view(), with_lse ? &lse_view : nullptr);
  const auto got = test::to_host_f32(dout);

  OwnedTensor expected(q.view().shape, DType::kF32), expected_lse(lse_shape, DType::kF32);
  ops::AttentionParams p;
  p.heads = c.heads;
  p.causal = c.causal;
  ops::attention(test::rounded_to(q, dtype), test::rounded_to(k, dtype), test::rounded_to(v, dtype), p,
                 expected, &expected_lse.view());
  const double err = test::relative_l2(got, test::reference_of(expected));
  EXPECT_LE(err, tolerance(dtype));
  // The inputs are the same rounded values on both sides, and the scores accumulate in f32 on both.
  if (with_lse)
    EXPECT_LE(test::relative_l2(test::to_host_f32(lse), test::reference_of(expected_lse)), 3e-5)
        << "log-sum-exp";
}

void check(const Case& c, DType dtype, gpu::KernelPath path) {
  const char* path_name = path == gpu::KernelPath::kFragments      ? " fragment layer"
                          : path == gpu::KernelPath::kPortable     ? " portable"
                          : path == gpu::KernelPath::kMfmaLayout   ? " mfma layout"
                          : path == gpu::KernelPath::kWmma11Layout ? " wmma11 layout"
                          : path == gpu::KernelPath::kWmma12Layout ? " wmma12 layout"
                                                                   : " fastest";
  // The log-sum-exp is written by the flash kernels, every path's (the materialised one refuses it).
  const bool with_lse = c.head_dim <= gpu::kMaxFlashHeadDim;
  check_run(c, dtype, path_name, with_lse,
            [&](const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const Tensor* lse) {
              gpu::attention(q, k, v, c.heads, c.causal, 0.f, out, path, lse);
            });
}

const Case kCases[] = {
    {2, 2, 300, 300, 40, false},   // SD1.5 self-attention's head size, lengths off the 64-query tile
    {2, 2, 130, 77, 40, false},    // cross-attention to the 77 text tokens
    {1, 3, 200, 77, 64, false},    // SD2.x / SDXL head size
    {2, 2, 129, 129, 80, false},   // SD1.5 level 2
    {1, 2, 64, 77, 128, false},
    {1, 2, 100, 33, 160, false},   // SD1.5 level 3
    {2, 4, 77, 77, 64, true},      // the text encoder's causal self-attention
    {1, 1, 1, 1, 64, false},       // one query, one key
    {1, 1, 70, 65, 8, false},      // the smallest head size
    // Enough queries x heads for 128-query blocks (head size 40) on a 132-multiprocessor GPU (H100/H200),
    // off the tile; and as many at head size 64, causal.
    {2, 8, 2200, 150, 40, false},
    {1, 16, 2200, 300, 64, true},
};

TEST(GpuAttention, MatchesCpuThroughMatrixUnits) {
  for (DType t : {DType::kF16, DType::kBF16})
    for (const Case& c : kCases) check(c, t, gpu::KernelPath::kTuned);
}

// What NVIDIA GPUs before Hopper run: on an H100 or H200 the tuned path above is the warpgroup kernel.
TEST(GpuAttention, MatchesCpuThroughTheFragmentLayer) {
  for (DType t : {DType::kF16, DType::kBF16})
    for (const Case& c : kCases) check(c, t, gpu::KernelPath::kFragments);
}

// Enough queries x heads for the warpgroup kernel's two-warpgroup blocks (128 queries) on a
// 132-multiprocessor GPU (H100/H200), at every head size it instantiates, lengths off its 64- and
// 128-key stages; one causal. Elsewhere the same cases test the fragment-layer kernel.
TEST(GpuAttention, EveryHeadSizeMatchesCpuInWideBlocks) {
  const Case cases[] = {
      {1, 12, 1300, 70, 32, false},   {1, 12, 1300, 150, 40, false},  {1, 12, 1300, 260, 48, false},
      {1, 12, 1300, 140, 64, true},   {1, 12, 1400, 200, 80, false},  {1, 12, 1300, 130, 96, false},
      {1, 12, 1300, 150, 128, false}, {1, 12, 1300, 100, 160, false},
  };
  for (DType t : {DType::kF16, DType::kBF16})
    for (const Case& c : cases) check(c, t, gpu::KernelPath::kTuned);
}

TEST(GpuAttention, MatchesCpuThroughPortableFragments) {
  for (DType t : {DType::kF16, DType::kBF16})
    for (const Case& c : kCases) check(c, t, gpu::KernelPath::kPortable);
}

// The kernel written for AMD's MFMA layout (64-lane 16x16 fragments, scores transposed), its layout
// emulated here: every index it derives from that layout, masking, causal, both dtypes.
TEST(GpuAttention, MatchesCpuThroughMfmaLayout) {
  for (DType t : {DType::kF16, DType::kBF16})
    for (const Case& c : kCases) check(c, t, gpu::KernelPath::kMfmaLayout);
}

// The same kernel on RDNA3's and RDNA4's WMMA layouts (32-lane 16x16 fragments, eight accumulators per
// lane, the probabilities exchanged between half-waves to become the next product's operand), emulated.
// On gfx11 heads wider than 96 run the portable kernel (amd_flash_max_head_dim), and so they do here.
TEST(GpuAttention, MatchesCpuThroughWmmaLayouts) {
  for (const gpu::KernelPath path : {gpu::KernelPath::kWmma11Layout, gpu::KernelPath::kWmma12Layout})
    for (DType t : {DType::kF16, DType::kBF16})
      for (const Case& c : kCases) check(c, t, path);
}

TEST(GpuAttention, OpApiDispatchesAndRefusesWhatItCannotDo) {
  test::Rng rng;
  const auto q = test::random_tensor(rng, Shape{1, 10, 64});
  const auto dq = test::to_gpu(q, DType::kF16);
  const auto out = test::poisoned_gpu(Shape{1, 10, 64}, DType::kF16);
  ops::AttentionParams p;
  p.heads = 1;
  ops::attention(dq, dq, dq, p, out);  // through the op API
  OwnedTensor expected(Shape{1, 10, 64}, DType::kF32);
  const auto r = test::rounded_to(q, DType::kF16);
  ops::attention(r, r, r, p, expected);
  EXPECT_LE(test::relative_l2(test::to_host_f32(out), test::reference_of(expected)), 2e-3);
  // f32 on the GPU is not done: a clear error, not wrong numbers.
  const auto f32 = test::to_gpu(q, DType::kF32);
  EXPECT_THROW(ops::attention(f32, f32, f32, p, test::poisoned_gpu(Shape{1, 10, 64}, DType::kF32)), Error);
  // A log-sum-exp of the wrong shape or dtype, and one for a head past the flash kernels, are refused.
  const auto wrong = test::poisoned_gpu(Shape{1, 10, 1}, DType::kF32);
  EXPECT_THROW(ops::attention(dq, dq, dq, p, out, &wrong.view()), Error);
  const auto half = test::poisoned_gpu(Shape{1, 1, 10}, DType::kF16);
  EXPECT_THROW(ops::attention(dq, dq, dq, p, out, &half.view()), Error);
  const auto wide = test::to_gpu(test::random_tensor(rng, Shape{1, 10, 512}), DType::kF16);
  const auto wide_lse = test::poisoned_gpu(Shape{1, 1, 10}, DType::kF32);
  try {
    ops::attention(wide, wide, wide, p, test::poisoned_gpu(Shape{1, 10, 512}, DType::kF16), &wide_lse.view());
    ADD_FAILURE() << "a 512-wide head's log-sum-exp was not refused";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUnsupported) << e.what();
  }
}

// Head dimensions the kernels do not take as they are (not a multiple of 8: a small model's 4-wide
// heads) run on copies widened by zeros; causal heads past the flash kernel's 160 mask the materialised
// path's scores. Every path, both dtypes.
TEST(GpuAttention, AnyHeadDimensionMatchesCpu) {
  const Case cases[] = {
      {2, 2, 70, 77, 4, false},  {1, 3, 33, 20, 1, false}, {2, 1, 65, 65, 12, true},
      {1, 2, 40, 9, 100, false}, {1, 1, 50, 50, 514, false}, {1, 2, 37, 37, 192, true},
  };
  for (const gpu::KernelPath path : {gpu::KernelPath::kTuned, gpu::KernelPath::kPortable,
                                     gpu::KernelPath::kMfmaLayout, gpu::KernelPath::kWmma12Layout})
    for (DType t : {DType::kF16, DType::kBF16})
      for (const Case& c : cases) check(c, t, path);
}

// Tensors that do not start on a 16-byte boundary (a view one element into a buffer) run on aligned
// copies: the same numbers as the CPU, and nothing written outside the output.
TEST(GpuAttention, UnalignedTensorsMatchCpu) {
  test::Rng rng;
  HD_SEED_TRACE(rng);
  const Shape shape{1, 45, 2 * 64};
  const auto q = test::random_tensor(rng, shape), k = test::random_tensor(rng, shape);
  const auto v = test::random_tensor(rng, shape);
  const auto one_in = [&](const OwnedTensor& t) {  // t on the GPU, one f16 element into a larger buffer
    OwnedTensor host(Shape{t.view().numel() + 1}, DType::kF32);
    host.ptr<float>()[0] = 7.f;
    std::copy_n(t.ptr<float>(), t.view().numel(), host.ptr<float>() + 1);
    return test::to_gpu(host, DType::kF16);
  };
  const auto dq = one_in(q), dk = one_in(k), dv = one_in(v), dout = one_in(q);
  const auto shifted = [&](const OwnedTensor& t) {
    return Tensor::contiguous(static_cast<uint16_t*>(t.view().data) + 1, DType::kF16, shape, t.view().device);
  };
  ops::AttentionParams p;
  p.heads = 2;
  ops::attention(shifted(dq), shifted(dk), shifted(dv), p, shifted(dout));
  const auto all = test::to_host_f32(dout);
  EXPECT_EQ(all.ptr<float>()[0], 7.f) << "the element before the output was written";
  OwnedTensor got(shape, DType::kF32);
  std::copy_n(all.ptr<float>() + 1, got.view().numel(), got.ptr<float>());
  OwnedTensor expected(shape, DType::kF32);
  ops::attention(test::rounded_to(q, DType::kF16), test::rounded_to(k, DType::kF16), test::rounded_to(v, DType::kF16),
                 p, expected);
  EXPECT_LE(test::relative_l2(got, test::reference_of(expected)), 2e-3);
}

// Query, key and value as column ranges of one stacked projection's output [B, L, 3W] (the UNet's
// self-attention) or key and value of one [B, Lk, 2W] (its cross-attention), read in place by every
// kernel; a head size the kernels do not take (4) and one past the flash kernels (192) through their
// copies and the materialised path; and a key with another row stride than its value (copied).
TEST(GpuAttention, ColumnRangesOfStackedRowsMatchCpu) {
  struct StackedCase {
    int heads, lq, lk, head_dim;
    bool cross, same_strides;
  };
  const StackedCase cases[] = {{2, 130, 130, 40, false, true},
                               {3, 70, 77, 64, true, true},
                               {2, 50, 50, 4, false, true},
                               {1, 40, 40, 192, false, true},
                               {2, 65, 65, 64, false, false}};
  for (const gpu::KernelPath path :
       {gpu::KernelPath::kTuned, gpu::KernelPath::kFragments, gpu::KernelPath::kPortable,
        gpu::KernelPath::kMfmaLayout, gpu::KernelPath::kWmma12Layout})
    for (DType t : {DType::kF16, DType::kBF16})
      for (const StackedCase& c : cases) {
        SCOPED_TRACE(testing::Message()
                     << dtype_name(t) << " path " << int(path) << " H" << c.heads << " D" << c.head_dim
                     << (c.cross ? " cross" : " self") << (c.same_strides ? "" : " other strides"));
        test::Rng rng;
        HD_SEED_TRACE(rng);
        const int64_t batch = 2, width = int64_t(c.heads) * c.head_dim;
        const auto qkv = test::random_tensor(rng, Shape{batch, c.lq, 3 * width});
        const auto kv = test::random_tensor(rng, Shape{batch, c.lk, 2 * width});
        const auto lone_v = test::random_tensor(rng, Shape{batch, c.lk, width});
        const auto views = [&](const Tensor& stacked, const Tensor& pair, const Tensor& lone) {
          const Tensor q = stacked.slice(2, 0, width);
          const Tensor k = c.cross ? pair.slice(2, 0, width) : stacked.slice(2, width, width);
          const Tensor v = !c.same_strides ? lone
                           : c.cross       ? pair.slice(2, width, width)
                                           : stacked.slice(2, 2 * width, width);
          return std::array<Tensor, 3>{q, k, v};
        };
        const auto dqkv = test::to_gpu(qkv, t), dkv = test::to_gpu(kv, t), dlone = test::to_gpu(lone_v, t);
        const auto d = views(dqkv, dkv, dlone);
        const auto dout = test::poisoned_gpu(Shape{batch, c.lq, width}, t);
        gpu::attention(d[0], d[1], d[2], c.heads, false, 0.f, dout, path);
        const auto rqkv = test::rounded_to(qkv, t), rkv = test::rounded_to(kv, t),
                   rlone = test::rounded_to(lone_v, t);
        const auto r = views(rqkv, rkv, rlone);
        OwnedTensor expected(Shape{batch, c.lq, width}, DType::kF32);
        ops::attention(r[0], r[1], r[2], {c.heads, false, 0.0f}, expected);
        EXPECT_LE(test::relative_l2(test::to_host_f32(dout), test::reference_of(expected)), tolerance(t));
      }
}

// Heads wider than the flash kernel's 160 (the VAE's one 512-wide head) take the materialised path:
// scores, softmax and P·V on the GEMM kernels. Lengths off the tiles, several heads, both dtypes.
TEST(GpuAttention, WideHeadsMatchCpuThroughTheMaterialisedPath) {
  for (DType t : {DType::kF16, DType::kBF16}) {
    for (const Case& c : {Case{1, 1, 256, 256, 512, false}, Case{2, 2, 100, 37, 192, false},
                          Case{1, 1, 3, 5, 512, false}}) {
      check(c, t, gpu::KernelPath::kTuned);
    }
  }
}

// The materialised path's queries in chunks whose scores fit a bound: 16 rows of each head at a time
// (the smallest chunk; 300 queries leave a last chunk of 12), 48 at a time, and a causal problem, which
// keeps its rows in one chunk whatever the bound.
TEST(GpuAttention, MaterialisedPathInChunksOfQueriesMatchesCpu) {
  struct Chunked {
    Case c;
    int64_t rows;  // the chunk's queries the bound leaves room for
  };
  for (DType t : {DType::kF16, DType::kBF16}) {
    for (const Chunked& k :
         {Chunked{{2, 2, 300, 77, 192, false}, 1}, Chunked{{2, 2, 300, 77, 192, false}, 48},
          Chunked{{1, 1, 100, 513, 512, false}, 33}, Chunked{{1, 2, 90, 90, 192, true}, 16}}) {
      const size_t bound = size_t(k.rows * k.c.batch * k.c.heads * k.c.lk) * dtype_size(t);
      check_run(k.c, t, " materialised in chunks", false,
                [&](const Tensor& q, const Tensor& key, const Tensor& v, const Tensor& out, const Tensor*) {
                  gpu::attention_materialised(q, key, v, k.c.heads, k.c.causal, 0.f, out, {bound, 1});
                });
    }
  }
}

}  // namespace
}  // namespace hd
