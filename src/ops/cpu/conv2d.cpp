// conv2d on the CPU: im2col into a bounded scratch buffer, then one sgemm per chunk of output pixels.
// NHWC makes each kernel tap a contiguous run of Cin floats, so im2col is a sequence of memcpys. And the
// weights of an upsampled convolution's phases (upsample_phases.h).
#include <algorithm>
#include <cstring>
#include <vector>

#include "core/thread_pool.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/upsample_phases.h"

namespace hd::ops::cpu {

namespace {
// Scratch per chunk: enough rows to keep sgemm efficient, few enough that a VAE decode at 1024x1024
// (Cin 128, 3x3: 1152 floats a row) does not need gigabytes.
constexpr int64_t kIm2colBudgetFloats = int64_t(8) << 20;  // 32 MiB
}  // namespace

void conv2d(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor* residual, Conv2dParams p,
            const Tensor& out) {
  const int64_t n = x.dim(0), h = x.dim(1), wd = x.dim(2), cin = x.dim(3);
  const int64_t cout = w.dim(0), kh = w.dim(1), kw = w.dim(2);
  const int64_t ho = out.dim(1), wo = out.dim(2);
  const int64_t pixels = n * ho * wo, row = kh * kw * cin;
  const float* xp = x.ptr<float>();
  const float* wp = w.ptr<float>();
  float* yp = out.ptr<float>();

  // Start the output from residual and/or bias; the GEMM then accumulates onto it (beta = 1).
  float beta = 0.0f;
  if (residual != nullptr || bias != nullptr) {
    const float* r = residual ? residual->ptr<float>() : nullptr;
    const float* b = bias ? bias->ptr<float>() : nullptr;
    ThreadPool::global().parallel_for(pixels, 256, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        for (int64_t c = 0; c < cout; ++c) yp[i * cout + c] = (r ? r[i * cout + c] : 0.0f) + (b ? b[c] : 0.0f);
    });
    beta = 1.0f;
  }

  const bool pointwise = kh == 1 && kw == 1 && p.stride == 1 && p.padding == 0 && p.extra_end_padding == 0;
  if (pointwise) {  // a 1x1 convolution is a plain GEMM over the pixels
    sgemm(false, true, pixels, cout, cin, 1.0f, xp, cin, wp, cin, beta, yp, cout);
    return;
  }
  const int64_t chunk = std::clamp<int64_t>(kIm2colBudgetFloats / std::max<int64_t>(row, 1), 1, pixels);
  std::vector<float> col(size_t(chunk * row));
  for (int64_t first = 0; first < pixels; first += chunk) {
    const int64_t count = std::min(chunk, pixels - first);
    ThreadPool::global().parallel_for(count, 64, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const int64_t pixel = first + r;
        const int64_t b = pixel / (ho * wo), oy = pixel / wo % ho, ox = pixel % wo;
        float* dst = col.data() + r * row;
        for (int64_t ky = 0; ky < kh; ++ky) {
          const int64_t iy = oy * p.stride - p.padding + ky;
          for (int64_t kx = 0; kx < kw; ++kx, dst += cin) {
            const int64_t ix = ox * p.stride - p.padding + kx;
            if (iy < 0 || iy >= h || ix < 0 || ix >= wd) {
              std::memset(dst, 0, size_t(cin) * sizeof(float));
            } else {
              std::memcpy(dst, xp + ((b * h + iy) * wd + ix) * cin, size_t(cin) * sizeof(float));
            }
          }
        }
      }
    });
    sgemm(false, true, count, cout, row, 1.0f, col.data(), row, wp, row, beta, yp + first * cout, cout);
  }
}

void upsample_conv2d_phases(const Tensor& w, const Tensor& out) {
  const int64_t cout = w.dim(0), cin = w.dim(3);
  const float* wp = w.ptr<float>();
  float* op = out.ptr<float>();
  for (int dy = 0; dy < 2; ++dy)
    for (int dx = 0; dx < 2; ++dx)
      for (int64_t co = 0; co < cout; ++co)
        for (int r = 0; r < 2; ++r)
          for (int c = 0; c < 2; ++c)
            for (int64_t ci = 0; ci < cin; ++ci) {
              float sum = 0.f;  // the GPU kernel's order (convert.cu)
              for (int a = phase_first_row(dy, r); a <= phase_last_row(dy, r); ++a)
                for (int b = phase_first_row(dx, c); b <= phase_last_row(dx, c); ++b)
                  sum += wp[((co * 3 + a) * 3 + b) * cin + ci];
              *op++ = sum;
            }
}

}  // namespace hd::ops::cpu
