// The op API: every computation the models are built from. Each op takes views (inputs and a
// preallocated output, so that outputs can come from the arena), checks shapes, dtypes and devices
// with errors that name both shapes, and runs on the device of its tensors.
//
// Layout is NHWC throughout: images are [N, H, W, C], token sequences [N, L, C]. Convolution weights
// are [Cout, kh, kw, Cin] (converted once at load time). The CPU reference computes in f32.
// Ops are callable from outside the engine: the PyTorch extension of a later issue calls these.
#pragma once

#include <vector>

#include "core/tensor.h"
#include "ops/sampler_update.h"

namespace hd::ops {

// ---- element types ----

// dst = src converted between f32, f16 and bf16 (round to nearest even); same shape, same device.
void convert(const Tensor& src, const Tensor& dst);
// dst = src, same shape and dtype: dense tensors between any two devices (host and GPU, either way, or
// within one); on one device also views whose last dimension is dense and whose other strides are any
// (a strip of rows of a batch, the inside of a padded buffer), copied a dense run at a time.
void copy(const Tensor& src, const Tensor& dst);
// Every element of the dense tensor t set to zero bits (0.0 in every float dtype).
void fill_zeros(const Tensor& t);

// ---- devices ----

// Makes `device` ready for tensors (a GPU's runtime, context and allocator); throws a clear error when
// this build has no kernels for its vendor or the device does not exist. Idempotent; every front end
// calls it first.
void prepare_device(const Device& device);
// Every GPU this build can compute on ("cuda:0", "cuda:1", ...; none in a CPU build or without a driver).
std::vector<Device> gpu_devices();
// Returns when every op queued on `device` has finished (a GPU's ops run asynchronously; the CPU's have
// finished when they return).
void synchronize(const Device& device);
// The most device memory the process's tensors (weights, activations, scratch) have held at once on a
// GPU, in bytes, since the process started (or, with since_mark, since the last mark_device_memory);
// 0 for the CPU, whose memory the allocator does not track.
size_t peak_device_memory(const Device& device, bool since_mark = false);
// Starts a since_mark window; returns the bytes in use now (0 for the CPU).
size_t mark_device_memory(const Device& device);
// Caps the bytes the process's tensors may hold on a GPU at once (0: no cap, the default): an allocation
// past it fails as running out of device memory does, so that a smaller card's budget can be kept on a
// larger one (and what happens when memory runs out, tested). Throws for the CPU.
void set_device_memory_limit(const Device& device, size_t bytes);
// What the process may hold on a GPU: set_device_memory_limit's cap, else the device's total memory;
// and what its tensors hold now. 0 for the CPU.
size_t device_memory_budget(const Device& device);
size_t device_memory_in_use(const Device& device);

// ---- convolution and matrix products ----

struct Conv2dParams {
  int stride = 1;
  int padding = 0;            // zero padding on all four sides
  int extra_end_padding = 0;  // further zeros after the bottom and right edges only: the VAE encoder's
                              // stride-2 downsampling pads (0, 1, 0, 1)
};
// Output shape of conv2d for input x [N, H, W, Cin] and weight w [Cout, kh, kw, Cin]; throws when the
// kernel does not fit or the shapes disagree.
Shape conv2d_output_shape(const Shape& x, const Shape& w, Conv2dParams p);
// out = conv(x, w) + bias + residual. bias [Cout] and residual [N, Ho, Wo, Cout] may be null;
// residual may alias out.
void conv2d(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor* residual, Conv2dParams p,
            const Tensor& out);

// diffusers' Upsample2D: out [N, 2H, 2W, Cout] = conv2d(upsample_nearest_2x(x), w, padding 1) + bias, for
// x [N, H, W, Cin], w [Cout, 3, 3, Cin], bias [Cout] (may be null). `phases` (may be null) are w's
// upsample_conv2d_phases on x's device: the GPU then may compute the four output phases from x itself
// (16 of the 36 multiply-adds, and no upsampled image; upsample_phases.h), which the autotuner races
// against upsampling and convolving. The CPU always upsamples and convolves.
void upsample_conv2d(const Tensor& x, const Tensor& w, const Tensor* phases, const Tensor* bias,
                     const Tensor& out);
// w [Cout, 3, 3, Cin] as the 2x2 kernels of the four output phases of its convolution of an upsampled
// image, out [2, 2, Cout, 2, 2, Cin] (phase row, phase column, then a kernel): each tap the sum of the 3x3
// taps that read the same pixel before upsampling (upsample_phases.h), in f32, rounded once.
void upsample_conv2d_phases(const Tensor& w, const Tensor& out);

// out [..., N] = x [..., K] · w[N, K]ᵀ + bias [N] (+ residual [..., N]); bias and residual may be null,
// residual may alias out (a transformer's residual stream, updated in place in one pass).
void linear(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor* residual, const Tensor& out);
inline void linear(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& out) {
  linear(x, w, bias, nullptr, out);
}

// out [B, M, N] = alpha · op(a) · op(b), op(a) = a [B, M, K] or, transposed, a [B, K, M]; likewise b.
void batched_matmul(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b, float alpha,
                    const Tensor& out);

// ---- attention ----

struct AttentionParams {
  int heads = 1;
  bool causal = false;  // query i sees keys j <= i (top-left aligned, as torch's is_causal)
  float scale = 0.0f;   // 0 means 1/sqrt(head_dim)
};
// out [B, Lq, H·D] = softmax(q kᵀ · scale) v per head, with q [B, Lq, H·D], k and v [B, Lk, H·D]. q, k
// and v may be column ranges of wider rows (one stacked projection's output, models/stacked_linear.h);
// out is dense. Where lse is given (dense [B, H, Lq] f32), each row's log-sum-exp of its scaled scores
// goes there too (natural log, as SDPA's; +inf for a row with no key): what attention_backward would
// otherwise recompute. The GPU writes it for heads up to 160 (the flash kernels) and refuses wider ones.
void attention(const Tensor& q, const Tensor& k, const Tensor& v, AttentionParams p, const Tensor& out,
               const Tensor* lse = nullptr);

// ---- normalisation ----

// GroupNorm over channels-last x [N, ..., C]: each of `groups` contiguous channel groups is normalised
// over all positions of its sample; then · gamma[C] + beta[C]; then SiLU if fuse_silu. Where
// channel_offset is given (dense [N, C], x's dtype and device), what is normalised is x + offset[n, c]:
// a ResNet block's timestep embedding, added without a pass of its own. The CPU and the GPU's two
// passes add in f32; the GPU's register-held paths round the sum to x's dtype first, as a separate
// addition would store it.
void group_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, int groups, float eps,
                bool fuse_silu, const Tensor& out, const Tensor* channel_offset = nullptr);
// LayerNorm over the last dimension of x [..., C], then · gamma[C] + beta[C].
void layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps, const Tensor& out);

// GroupNorm of an image that is processed in parts (the VAE's exact tiles), normalised with the whole
// image's statistics: group_statistics of each part's own pixels, group_norm_affine to combine them
// (host), group_norm_apply to each part.
//
// The statistics of each (sample, group) of x [N, H, W, C]: stats [N, groups, 2] f32, the mean and the
// sum of squared deviations from it. x may be a view with strided samples, rows and columns (a tile's core
// inside its halo); its channels must be dense.
void group_statistics(const Tensor& x, int groups, const Tensor& stats);
// The GroupNorm of the whole from its parts: parts [P, N, groups, 2] (group_statistics of each part, on
// the host), positions[p] the pixels of part p; gamma and beta [C] on any device. Returns the host f32
// map [N, C, 2] (scale, shift) that group_norm_apply takes. Parts combine exactly (Chan's pairwise
// formula, in double), so the whole's statistics do not depend on how it was cut.
OwnedTensor group_norm_affine(const Tensor& parts, const std::vector<int64_t>& positions, const Tensor& gamma,
                              const Tensor& beta, float eps);
// The same map computed where the parts are: parts [P, N, groups, 2] f32, gamma and beta [C] and affine
// [N, C, 2] f32 all on one device. No host round trip, so an image split over GPUs (each rank's
// statistics all-gathered) combines them inside a captured graph.
void group_norm_combine(const Tensor& parts, const std::vector<int64_t>& positions, const Tensor& gamma,
                        const Tensor& beta, float eps, const Tensor& affine);
// out = x · affine[n, c, 0] + affine[n, c, 1], then SiLU if fuse_silu, for x [N, ..., C] and affine
// [N, C, 2] f32 on x's device.
void group_norm_apply(const Tensor& x, const Tensor& affine, bool fuse_silu, const Tensor& out);

// ---- activations (out may alias x) ----

enum class GeluApproximation { kNone, kTanh };  // erf form, or the tanh approximation
void gelu(const Tensor& x, GeluApproximation approximation, const Tensor& out);
void quick_gelu(const Tensor& x, const Tensor& out);  // x · sigmoid(1.702 x), as CLIP ViT-L uses
void silu(const Tensor& x, const Tensor& out);
// out [..., N] = x[..., :N] · gelu(x[..., N:]) for x [..., 2N] (diffusers' GEGLU after its projection).
void geglu(const Tensor& x, GeluApproximation approximation, const Tensor& out);
// out [..., N] = geglu(x · wᵀ + bias) for w [2N, K] (diffusers' feed-forward input, projection and GEGLU
// in one): on the GPU the projection's halves meet in the product's epilogue and never reach memory
// (gpu/gemm.h, GemmGate); on the CPU the two ops above.
void linear_geglu(const Tensor& x, const Tensor& w, const Tensor* bias, GeluApproximation approximation,
                  const Tensor& out);
// Softmax over the last dimension.
void softmax(const Tensor& x, const Tensor& out);

// ---- elementwise, with numpy broadcasting (out may alias an input of its shape) ----

void add(const Tensor& a, const Tensor& b, const Tensor& out);
void mul(const Tensor& a, const Tensor& b, const Tensor& out);
void scale(const Tensor& x, float factor, const Tensor& out);

// ---- layout ----

// [N, H, W, C] -> [N, 2H, 2W, C], each pixel repeated 2x2.
void upsample_nearest_2x(const Tensor& x, const Tensor& out);
// Concatenation along the last (channel) dimension: [..., Ca] ++ [..., Cb] -> [..., Ca + Cb].
void concat_channels(const Tensor& a, const Tensor& b, const Tensor& out);
// The input of an unpadded 3x3 convolution of one strip of an image (comm::ImageSplit): out [N, h+2, W+2,
// C] = the dense strip x [N, h, W, C] with the row `above` on top and `below` underneath (views [N, 1, W,
// C] whose samples may be strided; null: zeros, at the image's edge) and a column of zeros either side.
void surround_strip(const Tensor& x, const Tensor* above, const Tensor* below, const Tensor& out);

// ---- gradients (what the PyTorch extension's autograd calls; CPU reference kernels so far, a GPU
// device gets no_kernel's error) ----

// Given out = attention(q, k, v, p) and grad_out (out's shape), writes grad_q, grad_k and grad_v (the
// shapes of q, k, v). The probabilities are recomputed from q and k, a block of queries at a time, as
// the forward computed them. lse, where given, is the forward's log-sum-exp (attention's): the GPU kernel
// then skips its own pass over Q and K for it; the CPU recomputes the softmax either way.
void attention_backward(const Tensor& grad_out, const Tensor& q, const Tensor& k, const Tensor& v,
                        const Tensor& out, AttentionParams p, const Tensor& grad_q, const Tensor& grad_k,
                        const Tensor& grad_v, const Tensor* lse = nullptr);
// Given out = group_norm(x, gamma, beta, groups, eps, fuse_silu): grad_x (x's shape), grad_gamma and
// grad_beta ([C]). The statistics are recomputed from x.
void group_norm_backward(const Tensor& grad_out, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                         int groups, float eps, bool fuse_silu, const Tensor& grad_x, const Tensor& grad_gamma,
                         const Tensor& grad_beta);
// Given out = layer_norm(x, gamma, beta, eps): grad_x, grad_gamma and grad_beta.
void layer_norm_backward(const Tensor& grad_out, const Tensor& x, const Tensor& gamma, float eps,
                         const Tensor& grad_x, const Tensor& grad_gamma, const Tensor& grad_beta);
// Given out = geglu(x, approximation): grad_x [..., 2N] from grad_out [..., N].
void geglu_backward(const Tensor& grad_out, const Tensor& x, GeluApproximation approximation,
                    const Tensor& grad_x);

// ---- the denoising loop's arithmetic, where the latents live ----

// The model's input: out [k·N, ...] = sample [N, ...] (f32) / divisor in out's dtype, repeated
// k = out.dim(0) / N times (twice under classifier-free guidance: both halves get the same input).
void sampler_input(const Tensor& sample, float divisor, const Tensor& out);
// One sampler step with classifier-free guidance, in one pass: sample [N, ...] (f32) advances in place
// from prediction ([2N, ...], unconditional half first, when u.guided(); else [N, ...]); noise [N, ...]
// (f32) is read when u.adds_noise(), previous_x0 (f32) when u.reads_previous_x0(), and x0 (f32) is written
// when u.writes_x0(); the others may be null. The formula is ops::updated_sample's (sampler_update.h).
void sampler_step(const SamplerUpdate& u, const Tensor& prediction, const Tensor& sample, const Tensor* noise,
                  const Tensor* previous_x0, const Tensor* x0);

// ---- embeddings ----

// out [..., D] = table[ids[...]] for ids (i32) of any shape and table [V, D]; an id outside [0, V) is an
// error naming it.
void embedding(const Tensor& ids, const Tensor& table, const Tensor& out);

// diffusers' get_timestep_embedding: out [N, dim] from timesteps [N] (f32).
struct TimestepEmbeddingParams {
  bool flip_sin_to_cos = true;       // SD's UNet: cos first
  float downscale_freq_shift = 0.0f;  // SD's UNet: 0
  float max_period = 10000.0f;
  float scale = 1.0f;
};
void timestep_embedding(const Tensor& timesteps, TimestepEmbeddingParams p, const Tensor& out);

}  // namespace hd::ops
