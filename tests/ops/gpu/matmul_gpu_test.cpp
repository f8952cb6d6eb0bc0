// The GPU's implicit-GEMM convolution, linear and batched products against the CPU reference on fresh
// random data: the UNet's and VAE's kernel sizes, strides and paddings, few-channel first convolutions
// (the gathering kernels), tile edges, bias and residual epilogues (the residual aliasing the output),
// f16 and bf16, through the matrix units, the portable fragment path, and AMD's MFMA and WMMA layouts
// (emulated where the GPU is not an AMD one).
#include <gtest/gtest.h>

#include <algorithm>

#include "core/error.h"
#include "ops/gpu/gemm.h"
#include "ops/gpu/gpu_ops.h"
#include "ops/gpu/gpu_test_util.h"
#include "ops/gpu/gpu_runtime.h"
#include "ops/ops.h"
#include "ops/tuning/autotuner.h"
#include "test_util.h"

namespace hd {
namespace {

// Relative L2 bounds: the inputs are rounded to the type before the CPU computes in f32, so what is left
// is the f32 accumulation order and one rounding of the output (f16: 11 significant bits, bf16: 8).
double tolerance(DType t) { return t == DType::kF16 ? 1e-3 : 8e-3; }

struct ConvCase {
  int64_t n, h, w, cin, cout, k;
  int stride, padding, extra_end_padding;
  bool bias, residual;
};

// The problem ops::conv2d hands the GEMM kernels; the residual in `out` itself (in place, as the UNet's
// resnets use it) or in a tensor of its own.
gpu::GemmProblem conv_problem(const ConvCase& c, const Tensor& x, const Tensor& w, const Tensor& bias,
                              const Tensor& out, const Tensor* separate_residual = nullptr) {
  const Tensor* residual = c.residual ? (separate_residual ? separate_residual : &out) : nullptr;
  return gpu::conv_gemm(x, w, c.bias ? &bias : nullptr, residual, {c.stride, c.padding, c.extra_end_padding}, out);
}

// Every candidate the autotuner may pick for the case (each tile shape of ours, and cuDNN where it is
// built in and takes the shape), one by one, against the CPU.
void check_conv(const ConvCase& c, DType dtype, gpu::KernelPath path) {
  test::Rng rng;
  HD_SEED_TRACE(rng);
  const ops::Conv2dParams p{c.stride, c.padding, c.extra_end_padding};
  const Shape xs{c.n, c.h, c.w, c.cin}, ws{c.cout, c.k, c.k, c.cin};
  const Shape os = ops::conv2d_output_shape(xs, ws, p);
  const auto x = test::random_tensor(rng, xs), w = test::random_tensor(rng, ws, 0.1f);
  const auto bias = test::random_tensor(rng, Shape{c.cout}), residual = test::random_tensor(rng, os);
  const auto dx = test::to_gpu(x, dtype), dw = test::to_gpu(w, dtype), db = test::to_gpu(bias, dtype);
  OwnedTensor expected(os, DType::kF32);
  const auto rb = test::rounded_to(bias, dtype), rr = test::rounded_to(residual, dtype);
  ops::conv2d(test::rounded_to(x, dtype), test::rounded_to(w, dtype), c.bias ? &rb.view() : nullptr,
              c.residual ? &rr.view() : nullptr, p, expected);
  const auto probe = test::poisoned_gpu(os, dtype), probe_residual = test::poisoned_gpu(os, dtype);
  const std::vector<std::string> names = gpu::gemm_candidates(conv_problem(c, dx, dw, db, probe), path);
  ASSERT_FALSE(names.empty());
  // Only our tiles on an AMD layout, never a library.
  const char* amd_suffix = path == gpu::KernelPath::kMfmaLayout     ? "-mfma"
                           : path == gpu::KernelPath::kWmma11Layout ? "-wmma11"
                           : path == gpu::KernelPath::kWmma12Layout ? "-wmma12"
                                                                  : nullptr;
  if (amd_suffix) {
    for (const std::string& name : names) EXPECT_NE(name.find(amd_suffix), std::string::npos) << name;
  }
  // With the residual in a tensor of its own, more candidates may run (cuDNN's graph API needs C apart
  // from the residual).
  const std::vector<std::string> separate_names =
      c.residual ? gpu::gemm_candidates(conv_problem(c, dx, dw, db, probe, &probe_residual.view()), path)
                 : std::vector<std::string>{};
  std::vector<std::string> all = names;
  for (const std::string& name : separate_names)
    if (std::find(all.begin(), all.end(), name) == all.end()) all.push_back(name);
  const auto offered = [&](const char* name) { return std::find(all.begin(), all.end(), name) != all.end(); };
  // Where cuDNN is built in, its graph API must take every multiple-of-8-channel convolution, so that
  // its engines are checked here rather than silently missing. The graph candidates are offered by rank
  // before cuDNN's heuristics are asked; a rank the heuristics do not fill for this shape (some shapes
  // have no engine that ships compiled) fails as unsupported, as the autotuner sees it, and is skipped.
  const bool graph_expected = offered("cudnn") && c.cin % 8 == 0 && c.cout % 8 == 0;
  if (graph_expected) EXPECT_TRUE(offered("cudnn-graph-0") && offered("cudnn-graph-rtc-0"));
  int graph_engines_run = 0;
  const auto run = [&](const gpu::GemmProblem& problem, const std::string& name) {
    try {
      gpu::gemm_with(problem, name, path);
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::kUnsupported || !name.starts_with("cudnn-graph-")) throw;
      return false;
    }
    graph_engines_run += name.starts_with("cudnn-graph-");
    return true;
  };
  for (const std::string& name : all) {
    SCOPED_TRACE(testing::Message() << dtype_name(dtype) << " " << name << " x[" << c.n << "," << c.h << "," << c.w
                                    << "," << c.cin << "] k" << c.k << " cout " << c.cout << " s" << c.stride << " p"
                                    << c.padding << "+" << c.extra_end_padding);
    // With a residual, the output starts as the residual and is overwritten in place (as the UNet's
    // resnets use it); otherwise it starts poisoned.
    if (std::find(names.begin(), names.end(), name) != names.end()) {
      const auto dout = c.residual ? test::to_gpu(residual, dtype) : test::poisoned_gpu(os, dtype);
      if (run(conv_problem(c, dx, dw, db, dout), name))
        EXPECT_LE(test::relative_l2(test::to_host_f32(dout), test::reference_of(expected)), tolerance(dtype));
    }
    if (std::find(separate_names.begin(), separate_names.end(), name) != separate_names.end()) {
      // The residual in a tensor of its own (a resnet's shortcut), left unchanged.
      const auto dres = test::to_gpu(residual, dtype), separate = test::poisoned_gpu(os, dtype);
      if (run(conv_problem(c, dx, dw, db, separate, &dres.view()), name)) {
        EXPECT_LE(test::relative_l2(test::to_host_f32(separate), test::reference_of(expected)), tolerance(dtype));
        EXPECT_EQ(test::relative_l2(test::to_host_f32(dres), test::reference_of(rr)), 0.0);
      }
    }
  }
  if (graph_expected) EXPECT_GT(graph_engines_run, 0);
  // And through the op API, which lets the autotuner choose.
  if (path == gpu::KernelPath::kTuned) {
    const auto dout = c.residual ? test::to_gpu(residual, dtype) : test::poisoned_gpu(os, dtype);
    ops::conv2d(dx, dw, c.bias ? &db.view() : nullptr, c.residual ? &dout.view() : nullptr, p, dout);
    EXPECT_LE(test::relative_l2(test::to_host_f32(dout), test::reference_of(expected)), tolerance(dtype));
  }
}

const ConvCase kConvCases[] = {
    {2, 9, 11, 64, 96, 3, 1, 1, 0, true, true},    // a resnet's conv2: 3x3, residual in place
    {1, 16, 16, 32, 32, 3, 2, 1, 0, true, false},  // the UNet's downsampler: stride 2
    {1, 9, 9, 32, 40, 3, 2, 0, 1, true, false},    // the VAE encoder's (0, 1, 0, 1)-padded downsampler
    {2, 7, 5, 96, 64, 1, 1, 0, 0, true, true},     // a 1x1 shortcut
    {1, 12, 10, 4, 64, 3, 1, 1, 0, true, false},   // conv_in: 4 latent channels (gathered)
    {1, 10, 8, 3, 32, 3, 1, 1, 0, true, false},    // the VAE encoder's conv_in: RGB
    {1, 8, 8, 64, 3, 3, 1, 1, 0, true, false},     // the VAE decoder's conv_out: 3 output channels
    {1, 33, 31, 320, 320, 3, 1, 1, 0, true, false}, // SD's widths; M, N, K all off the tiles
    {2, 8, 8, 64, 64, 3, 1, 1, 0, false, true},     // a residual without bias
};

TEST(GpuConv2d, MatchesCpuThroughMatrixUnits) {
  for (DType t : {DType::kF16, DType::kBF16})
    for (const ConvCase& c : kConvCases) check_conv(c, t, gpu::KernelPath::kTuned);
}

TEST(GpuConv2d, MatchesCpuThroughPortableFragments) {
  for (DType t : {DType::kF16, DType::kBF16})
    for (const ConvCase& c : kConvCases) check_conv(c, t, gpu::KernelPath::kPortable);
}

// AMD's MFMA fragment layout (64-lane 16x16 fragments): the instruction on gfx90a; here, on NVIDIA, its
// emulation, which checks every index the GEMM kernel derives from that layout (operand loads, tile
// passes of 64-lane groups, the epilogue's rows and columns, split-K) against the CPU.
TEST(GpuConv2d, MatchesCpuThroughMfmaLayout) {
  for (DType t : {DType::kF16, DType::kBF16})
    for (const ConvCase& c : kConvCases) check_conv(c, t, gpu::KernelPath::kMfmaLayout);
}

// AMD RDNA3's and RDNA4's WMMA layouts (32-lane 16x16 fragments, eight accumulators per lane, each with
// its own operand and accumulator register map): the instruction on gfx11 / gfx12; here their emulations,
// which check the GEMM kernel's loads, accumulator rows and epilogue for each map against the CPU.
TEST(GpuConv2d, MatchesCpuThroughWmmaLayouts) {
  for (const gpu::KernelPath path : {gpu::KernelPath::kWmma11Layout, gpu::KernelPath::kWmma12Layout})
    for (DType t : {DType::kF16, DType::kBF16})
      for (const ConvCase& c : kConvCases) check_conv(c, t, path);
}

TEST(GpuLinear, MatchesCpuWithAndWithoutBias) {
  for (DType t : {DType::kF16, DType::kBF16}) {
    for (const auto& [m, n, k, with_bias] : {std::tuple{2 * 77, 320, 768, false}, std::tuple{300, 2560, 320, true},
                                              std::tuple{2, 1280, 320, true}, std::tuple{5, 7, 12, true}}) {
      SCOPED_TRACE(testing::Message() << dtype_name(t) << " m" << m << " n" << n << " k" << k);
      test::Rng rng;
      HD_SEED_TRACE(rng);
      const auto x = test::random_tensor(rng, Shape{1, m, k}), w = test::random_tensor(rng, Shape{n, k}, 0.05f);
      const auto b = test::random_tensor(rng, Shape{n});
      const auto dx = test::to_gpu(x, t), dw = test::to_gpu(w, t), db = test::to_gpu(b, t);
      OwnedTensor expected(Shape{1, m, n}, DType::kF32);
      const auto rb = test::rounded_to(b, t);
      ops::linear(test::rounded_to(x, t), test::rounded_to(w, t), with_bias ? &rb.view() : nullptr, expected);
      const auto dout = test::poisoned_gpu(Shape{1, m, n}, t);
      ops::linear(dx, dw, with_bias ? &db.view() : nullptr, dout);  // the autotuner's choice
      EXPECT_LE(test::relative_l2(test::to_host_f32(dout), test::reference_of(expected)), tolerance(t));
      // Every candidate (our tiles, and cuBLASLt where it is built in and takes the shape), one by one.
      const auto problem = [&](const Tensor& out) {
        gpu::GemmProblem g = gpu::dense_gemm(t, dx.view().device, m, n, k, dx.view().data, k, dw.view().data, k,
                                             out.data, n);
        g.bias = with_bias ? db.view().data : nullptr;
        return g;
      };
      for (const gpu::KernelPath path : {gpu::KernelPath::kTuned, gpu::KernelPath::kMfmaLayout, gpu::KernelPath::kWmma11Layout,
                                       gpu::KernelPath::kWmma12Layout}) {
        for (const std::string& name : gpu::gemm_candidates(problem(dout), path)) {
          const auto each = test::poisoned_gpu(Shape{1, m, n}, t);
          gpu::gemm_with(problem(each), name, path);
          EXPECT_LE(test::relative_l2(test::to_host_f32(each), test::reference_of(expected)), tolerance(t)) << name;
        }
      }
    }
  }
}

bool is_library(const std::string& candidate) {
  for (const char* library : {"cudnn", "cublaslt", "hipblaslt", "rocblas", "miopen"})
    if (candidate.rfind(library, 0) == 0) return true;
  return false;
}

// --kernels own (ops::KernelChoice::kOwn): the tuned path offers our tiles only, for convolutions and dense
// products alike, and the ops still match the CPU through them; with all, the vendor's libraries are back
// (cuBLASLt is in every CUDA build). --kernels fragments leaves Hopper's warpgroup tiles out too.
TEST(GpuKernelChoice, OwnLeavesEveryVendorLibraryOut) {
  struct Restore {
    ops::KernelChoice before = ops::kernel_choice();
    ~Restore() { ops::set_kernel_choice(before); }
  } restore;
  const DType t = DType::kF16;
  const ConvCase c = kConvCases[7];  // SD's widths, 3x3
  const Shape xs{c.n, c.h, c.w, c.cin}, ws{c.cout, c.k, c.k, c.cin};
  const Shape os = ops::conv2d_output_shape(xs, ws, {c.stride, c.padding, c.extra_end_padding});
  test::Rng rng;
  const auto dx = test::to_gpu(test::random_tensor(rng, xs), t), dw = test::to_gpu(test::random_tensor(rng, ws), t);
  const auto db = test::to_gpu(test::random_tensor(rng, Shape{c.cout}), t), dout = test::poisoned_gpu(os, t);
  const int64_t m = 256, n = 320, k = 640;
  const auto a = test::to_gpu(test::random_tensor(rng, Shape{m, k}), t), b = test::to_gpu(test::random_tensor(rng, Shape{n, k}), t);
  const auto product = test::poisoned_gpu(Shape{m, n}, t);
  const auto dense = gpu::dense_gemm(t, a.view().device, m, n, k, a.view().data, k, b.view().data, k, product.view().data, n);
  const auto candidates = [&] {
    std::vector<std::string> names = gpu::gemm_candidates(conv_problem(c, dx, dw, db, dout));
    for (const std::string& name : gpu::gemm_candidates(dense)) names.push_back(name);
    return names;
  };
  ops::set_kernel_choice(ops::KernelChoice::kOwn);
  const std::vector<std::string> own = candidates();
  ASSERT_FALSE(own.empty());
  for (const std::string& name : own) EXPECT_FALSE(is_library(name)) << name;
  for (DType dtype : {DType::kF16, DType::kBF16}) check_conv(c, dtype, gpu::KernelPath::kTuned);
  // fragments: ours without Hopper's warpgroup tiles (what GPUs before Hopper run), still correct.
  ops::set_kernel_choice(ops::KernelChoice::kFragments);
  const std::vector<std::string> fragments = candidates();
  ASSERT_FALSE(fragments.empty());
  for (const std::string& name : fragments) {
    EXPECT_FALSE(is_library(name)) << name;
    EXPECT_EQ(name.rfind("wgmma", 0), std::string::npos) << name;
  }
  for (DType dtype : {DType::kF16, DType::kBF16}) check_conv(c, dtype, gpu::KernelPath::kTuned);
  ops::set_kernel_choice(ops::KernelChoice::kAll);
  const std::vector<std::string> all = candidates();
  EXPECT_GE(all.size(), own.size());
  if (gpu::device_matrix_unit(0) == gpu::MatrixUnit::kNvidiaMma)
    EXPECT_TRUE(std::any_of(all.begin(), all.end(), is_library));
  if (gpu::has_warpgroup_mma(0))
    EXPECT_TRUE(
        std::any_of(own.begin(), own.end(), [](const std::string& n) { return n.rfind("wgmma", 0) == 0; }));
}

// The residual fused into the product, in a tensor of its own and in place (the transformer's residual
// stream), through the autotuner's choice and through every candidate.
TEST(GpuLinear, AddsTheResidualSeparateOrInPlace) {
  for (DType t : {DType::kF16, DType::kBF16}) {
    for (const auto& [m, n, k] : {std::tuple{8192, 320, 1280}, std::tuple{154, 768, 3072}, std::tuple{5, 16, 24}}) {
      SCOPED_TRACE(testing::Message() << dtype_name(t) << " m" << m << " n" << n << " k" << k);
      test::Rng rng;
      HD_SEED_TRACE(rng);
      const auto x = test::random_tensor(rng, Shape{1, m, k}), w = test::random_tensor(rng, Shape{n, k}, 0.05f);
      const auto b = test::random_tensor(rng, Shape{n}), residual = test::random_tensor(rng, Shape{1, m, n});
      const auto dx = test::to_gpu(x, t), dw = test::to_gpu(w, t), db = test::to_gpu(b, t);
      OwnedTensor expected(Shape{1, m, n}, DType::kF32);
      const auto rb = test::rounded_to(b, t), rr = test::rounded_to(residual, t);
      ops::linear(test::rounded_to(x, t), test::rounded_to(w, t), &rb.view(), &rr.view(), expected);
      const auto dres = test::to_gpu(residual, t), separate = test::poisoned_gpu(Shape{1, m, n}, t);
      ops::linear(dx, dw, &db.view(), &dres.view(), separate);
      EXPECT_LE(test::relative_l2(test::to_host_f32(separate), test::reference_of(expected)), tolerance(t));
      EXPECT_EQ(test::relative_l2(test::to_host_f32(dres), test::reference_of(rr)), 0.0);  // left unchanged
      const auto stream = test::to_gpu(residual, t);
      ops::linear(dx, dw, &db.view(), &stream.view(), stream);
      EXPECT_LE(test::relative_l2(test::to_host_f32(stream), test::reference_of(expected)), tolerance(t));
      const auto problem = [&](const Tensor& res, const Tensor& out) {
        gpu::GemmProblem g = gpu::dense_gemm(t, dx.view().device, m, n, k, dx.view().data, k, dw.view().data, k,
                                             out.data, n);
        g.bias = db.view().data;
        g.residual = res.data;
        return g;
      };
      for (const gpu::KernelPath path : {gpu::KernelPath::kTuned, gpu::KernelPath::kMfmaLayout, gpu::KernelPath::kWmma11Layout,
                                       gpu::KernelPath::kWmma12Layout}) {
        for (const std::string& name : gpu::gemm_candidates(problem(dres, separate), path)) {
          const auto each = test::poisoned_gpu(Shape{1, m, n}, t);
          gpu::gemm_with(problem(dres, each), name, path);
          EXPECT_LE(test::relative_l2(test::to_host_f32(each), test::reference_of(expected)), tolerance(t)) << name;
          const auto in_place = test::to_gpu(residual, t);
          gpu::gemm_with(problem(in_place, in_place), name, path);
          EXPECT_LE(test::relative_l2(test::to_host_f32(in_place), test::reference_of(expected)), tolerance(t))
              << name;
        }
      }
    }
  }
}

// The feed-forward's projection and GEGLU as one problem (GemmGate): the tiles with GEGLU in their
// epilogue (B's rows read in chunks of hidden and gate columns), and the unfused candidate (the plain
// product into scratch, then the GEGLU kernel), each against the CPU's projection and GEGLU; on widths
// that are whole chunks (SD's) and one that is not (only the unfused candidate takes it), M off the tiles,
// with and without bias, both GELU forms; through the matrix units, the portable fragments and each AMD
// layout (emulated here).
TEST(GpuLinearGeglu, MatchesCpuThroughEveryCandidate) {
  struct Case {
    int64_t m, half, k;
    bool bias;
    ops::GeluApproximation form;
  };
  const Case cases[] = {
      {300, 1280, 320, true, ops::GeluApproximation::kNone},  // SD1.5's 64x64 level, M off the tiles
      {77, 64, 96, false, ops::GeluApproximation::kNone},
      {130, 48, 64, true, ops::GeluApproximation::kTanh},
      {5, 24, 16, true, ops::GeluApproximation::kNone}};  // 48 wide: not whole chunks
  for (DType t : {DType::kF16, DType::kBF16}) {
    for (const Case& c : cases) {
      SCOPED_TRACE(testing::Message() << dtype_name(t) << " m" << c.m << " F" << c.half << " k" << c.k);
      test::Rng rng;
      HD_SEED_TRACE(rng);
      const auto x = test::random_tensor(rng, Shape{1, c.m, c.k}),
                 w = test::random_tensor(rng, Shape{2 * c.half, c.k}, 0.1f);
      const auto b = test::random_tensor(rng, Shape{2 * c.half});
      const auto dx = test::to_gpu(x, t), dw = test::to_gpu(w, t), db = test::to_gpu(b, t);
      const Shape os{1, c.m, c.half};
      OwnedTensor expected(os, DType::kF32);
      const auto rb = test::rounded_to(b, t);
      ops::linear_geglu(test::rounded_to(x, t), test::rounded_to(w, t), c.bias ? &rb.view() : nullptr, c.form,
                        expected);
      const auto dout = test::poisoned_gpu(os, t);
      ops::linear_geglu(dx, dw, c.bias ? &db.view() : nullptr, c.form, dout);  // the autotuner's choice
      EXPECT_LE(test::relative_l2(test::to_host_f32(dout), test::reference_of(expected)), tolerance(t));
      const auto problem = [&](const Tensor& out) {
        gpu::GemmProblem g = gpu::dense_gemm(t, dx.view().device, c.m, 2 * c.half, c.k, dx.view().data, c.k,
                                             dw.view().data, c.k, out.data, c.half);
        g.bias = c.bias ? db.view().data : nullptr;
        g.gate = c.form == ops::GeluApproximation::kTanh ? gpu::GemmGate::kGeluTanh : gpu::GemmGate::kGeluErf;
        return g;
      };
      for (const gpu::KernelPath path :
           {gpu::KernelPath::kTuned, gpu::KernelPath::kPortable, gpu::KernelPath::kMfmaLayout,
            gpu::KernelPath::kWmma11Layout, gpu::KernelPath::kWmma12Layout}) {
        const std::vector<std::string> names = gpu::gemm_candidates(problem(dout), path);
        EXPECT_NE(std::find(names.begin(), names.end(), "unfused"), names.end());
        const bool whole_chunks = c.half % 16 == 0;
        EXPECT_EQ(std::any_of(names.begin(), names.end(),
                              [](const std::string& n) { return n.find("-geglu") != std::string::npos; }),
                  whole_chunks);
        for (const std::string& name : names) {
          const auto each = test::poisoned_gpu(os, t);
          gpu::gemm_with(problem(each), name, path);
          EXPECT_LE(test::relative_l2(test::to_host_f32(each), test::reference_of(expected)), tolerance(t))
              << name;
        }
      }
    }
  }
}

// diffusers' Upsample2D as one problem (gemm.h, upsample_conv_gemm): the four output phases' 2x2 kernels
// over the image itself (a batch of problems padded apart, C's rows in groups) through every tile that
// takes them (split-K among them), and the unfused candidate (upsample into scratch, then the 3x3
// convolution), each against the CPU's upsampling and convolution; the phase weights bit for bit against
// the CPU's transform. Odd sizes, an output width off the tiles, few channels (the gathering tile); through
// the matrix units, the portable fragments and each AMD layout (emulated here); then the op, with its
// phases and without.
TEST(GpuUpsampleConv2d, MatchesCpuThroughEveryCandidate) {
  struct Case {
    int64_t n, h, w, cin, cout;
    bool bias;
  };
  const Case cases[] = {{2, 8, 8, 64, 64, true}, {1, 5, 7, 160, 40, true}, {1, 3, 6, 3, 8, false}};
  for (DType t : {DType::kF16, DType::kBF16}) {
    for (const Case& c : cases) {
      SCOPED_TRACE(testing::Message() << dtype_name(t) << " x[" << c.n << "," << c.h << "," << c.w << ","
                                      << c.cin << "] -> " << c.cout);
      test::Rng rng;
      HD_SEED_TRACE(rng);
      const auto x = test::random_tensor(rng, Shape{c.n, c.h, c.w, c.cin}),
                 w = test::random_tensor(rng, Shape{c.cout, 3, 3, c.cin}, 0.1f);
      const auto b = test::random_tensor(rng, Shape{c.cout});
      const auto dx = test::to_gpu(x, t), dw = test::to_gpu(w, t), db = test::to_gpu(b, t);
      const Shape os{c.n, 2 * c.h, 2 * c.w, c.cout}, ps{2, 2, c.cout, 2, 2, c.cin};
      OwnedTensor expected(os, DType::kF32);
      const auto rw = test::rounded_to(w, t), rb = test::rounded_to(b, t);
      ops::upsample_conv2d(test::rounded_to(x, t), rw, nullptr, c.bias ? &rb.view() : nullptr, expected);
      // The phases: the GPU's sums, rounded, are the CPU's sums of the same weights, rounded.
      OwnedTensor cpu_phases(ps, DType::kF32);
      ops::upsample_conv2d_phases(rw, cpu_phases);
      const auto dphases = test::poisoned_gpu(ps, t);
      ops::upsample_conv2d_phases(dw, dphases);
      EXPECT_EQ(
          test::relative_l2(test::to_host_f32(dphases), test::reference_of(test::rounded_to(cpu_phases, t))),
          0.0);
      const Tensor* bias = c.bias ? &db.view() : nullptr;
      for (const gpu::KernelPath path :
           {gpu::KernelPath::kTuned, gpu::KernelPath::kPortable, gpu::KernelPath::kMfmaLayout,
            gpu::KernelPath::kWmma11Layout, gpu::KernelPath::kWmma12Layout}) {
        const auto probe = test::poisoned_gpu(os, t);
        const std::vector<std::string> names =
            gpu::gemm_candidates(gpu::upsample_conv_gemm(dx, dphases, dw, bias, probe), path);
        EXPECT_NE(std::find(names.begin(), names.end(), "unfused"), names.end());
        EXPECT_GE(names.size(), 2u) << "no tile takes the phases";
        for (const std::string& name : names) {
          const auto each = test::poisoned_gpu(os, t);
          gpu::gemm_with(gpu::upsample_conv_gemm(dx, dphases, dw, bias, each), name, path);
          EXPECT_LE(test::relative_l2(test::to_host_f32(each), test::reference_of(expected)), tolerance(t))
              << name;
        }
      }
      for (const bool with_phases :
           {true, false}) {  // the op: the autotuner's choice, or upsample and convolve
        const auto dout = test::poisoned_gpu(os, t);
        ops::upsample_conv2d(dx, dw, with_phases ? &dphases.view() : nullptr, bias, dout);
        EXPECT_LE(test::relative_l2(test::to_host_f32(dout), test::reference_of(expected)), tolerance(t))
            << (with_phases ? "with phases" : "without");
      }
    }
  }
}

// A GEGLU problem the kernels cannot take is refused with the reason, not run wrong.
TEST(GpuLinearGeglu, RefusesAResidualOrABatch) {
  test::Rng rng;
  const DType t = DType::kF16;
  const auto a = test::to_gpu(test::random_tensor(rng, Shape{64, 32}), t),
             w = test::to_gpu(test::random_tensor(rng, Shape{64, 32}), t);
  const auto out = test::poisoned_gpu(Shape{64, 32}, t);
  gpu::GemmProblem g = gpu::dense_gemm(t, a.view().device, 64, 64, 32, a.view().data, 32, w.view().data, 32,
                                       out.view().data, 32);
  g.gate = gpu::GemmGate::kGeluErf;
  gpu::GemmProblem with_residual = g;
  with_residual.residual = out.view().data;
  EXPECT_THROW(gpu::gemm(with_residual), Error);
  gpu::GemmProblem batched = g;
  batched.outer = 2;
  EXPECT_THROW(gpu::gemm(batched), Error);
  gpu::GemmProblem strided = g;
  strided.ldc = 64;
  EXPECT_THROW(gpu::gemm(strided), Error);
}

TEST(GpuBatchedMatmul, MatchesCpuInEveryOrientation) {
  for (DType t : {DType::kF16, DType::kBF16}) {
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        SCOPED_TRACE(testing::Message() << dtype_name(t) << " ta " << ta << " tb " << tb);
        test::Rng rng;
        HD_SEED_TRACE(rng);
        const int64_t batch = 3, m = 70, n = 45, k = 72;
        const auto a = test::random_tensor(rng, ta ? Shape{batch, k, m} : Shape{batch, m, k});
        const auto b = test::random_tensor(rng, tb ? Shape{batch, n, k} : Shape{batch, k, n});
        const auto da = test::to_gpu(a, t), db = test::to_gpu(b, t);
        const auto dout = test::poisoned_gpu(Shape{batch, m, n}, t);
        ops::batched_matmul(da, db, ta, tb, 0.5f, dout);
        OwnedTensor expected(Shape{batch, m, n}, DType::kF32);
        ops::batched_matmul(test::rounded_to(a, t), test::rounded_to(b, t), ta, tb, 0.5f, expected);
        EXPECT_LE(test::relative_l2(test::to_host_f32(dout), test::reference_of(expected)), tolerance(t));
      }
    }
  }
}

TEST(GpuMatmul, RefusesMixedAndF32Operands) {
  test::Rng rng;
  const auto x = test::random_tensor(rng, Shape{4, 8}), w = test::random_tensor(rng, Shape{8, 8});
  const auto x16 = test::to_gpu(x, DType::kF16), wb16 = test::to_gpu(w, DType::kBF16);
  EXPECT_THROW(ops::linear(x16, wb16, nullptr, test::poisoned_gpu(Shape{4, 8}, DType::kF16)), Error);
  const auto x32 = test::to_gpu(x, DType::kF32), w32 = test::to_gpu(w, DType::kF32);
  EXPECT_THROW(ops::linear(x32, w32, nullptr, test::poisoned_gpu(Shape{4, 8}, DType::kF32)), Error);
}

}  // namespace
}  // namespace hd
