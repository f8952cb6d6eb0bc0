// Layout ops and the timestep embedding on the CPU.
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/thread_pool.h"
#include "ops/cpu/cpu_ops.h"

namespace hd::ops::cpu {

void upsample_nearest_2x(const Tensor& x, const Tensor& out) {
  const int64_t n = x.dim(0), h = x.dim(1), w = x.dim(2), c = x.dim(3);
  const float* xp = x.ptr<float>();
  float* yp = out.ptr<float>();
  ThreadPool::global().parallel_for(n * 2 * h, 8, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {  // row of the output: (sample, oy)
      const int64_t b = row / (2 * h), oy = row % (2 * h);
      const float* src = xp + (b * h + oy / 2) * w * c;
      float* dst = yp + row * 2 * w * c;
      for (int64_t ox = 0; ox < 2 * w; ++ox) std::memcpy(dst + ox * c, src + ox / 2 * c, size_t(c) * sizeof(float));
    }
  });
}

void concat_channels(const Tensor& a, const Tensor& b, const Tensor& out) {
  const int64_t ca = a.dim(-1), cb = b.dim(-1), c = ca + cb;
  const int64_t rows = c == 0 ? 0 : out.numel() / c;
  const float* ap = a.ptr<float>();
  const float* bp = b.ptr<float>();
  float* yp = out.ptr<float>();
  ThreadPool::global().parallel_for(rows, 256, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      std::memcpy(yp + r * c, ap + r * ca, size_t(ca) * sizeof(float));
      std::memcpy(yp + r * c + ca, bp + r * cb, size_t(cb) * sizeof(float));
    }
  });
}

void embedding(const Tensor& ids, const Tensor& table, const Tensor& out) {
  const int64_t vocab = table.dim(0), width = table.dim(1);
  const int32_t* id = ids.ptr<int32_t>();
  const float* tp = table.ptr<float>();
  float* yp = out.ptr<float>();
  for (int64_t i = 0; i < ids.numel(); ++i) {
    HD_CHECK(id[i] >= 0 && id[i] < vocab, "embedding: token id ", id[i], " at position ", i,
             " is outside the vocabulary of ", vocab);
    std::memcpy(yp + i * width, tp + int64_t(id[i]) * width, size_t(width) * sizeof(float));
  }
}

void timestep_embedding(const Tensor& timesteps, TimestepEmbeddingParams p, const Tensor& out) {
  const int64_t n = out.dim(0), dim = out.dim(1), half = dim / 2;
  const float* t = timesteps.ptr<float>();
  float* yp = out.ptr<float>();
  for (int64_t i = 0; i < n; ++i) {
    float* row = yp + i * dim;
    for (int64_t j = 0; j < half; ++j) {
      // diffusers' arithmetic, in its f32 order: exp(-ln(max_period) · j / (half - shift)) · t · scale.
      const float exponent = float(-std::log(double(p.max_period))) * float(j) / (float(half) - p.downscale_freq_shift);
      const float arg = p.scale * (t[i] * std::exp(exponent));
      const float s = std::sin(arg), co = std::cos(arg);
      row[j] = p.flip_sin_to_cos ? co : s;
      row[half + j] = p.flip_sin_to_cos ? s : co;
    }
    if (dim % 2 == 1) row[dim - 1] = 0.0f;  // odd widths are zero-padded, as in diffusers
  }
}

void surround_strip(const Tensor& x, const Tensor* above, const Tensor* below, const Tensor& out) {
  const int64_t n = x.dim(0), h = x.dim(1), w = x.dim(2), c = x.dim(3);
  std::memset(out.data, 0, out.nbytes());
  const size_t row_bytes = size_t(w * c) * sizeof(float);
  float* o = out.ptr<float>();
  for (int64_t s = 0; s < n; ++s) {
    // Row y of the output, from column 1 on.
    const auto row_at = [&](int64_t y) { return o + ((s * (h + 2) + y) * (w + 2) + 1) * c; };
    if (above != nullptr) std::memcpy(row_at(0), above->ptr<float>() + s * above->strides[0], row_bytes);
    for (int64_t y = 0; y < h; ++y) std::memcpy(row_at(y + 1), x.ptr<float>() + (s * h + y) * w * c, row_bytes);
    if (below != nullptr) std::memcpy(row_at(h + 1), below->ptr<float>() + s * below->strides[0], row_bytes);
  }
}

}  // namespace hd::ops::cpu
