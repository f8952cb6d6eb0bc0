// ImageSplit: the exchanges of an image split, as views, copies and one all-gather each.
#include "comm/image_split.h"

#include <utility>
#include <vector>

#include "core/error.h"
#include "ops/ops.h"
#if defined(HD_WITH_GPU)
#include "ops/gpu/gpu_runtime.h"
#endif

namespace hd::comm {

namespace {

// The view of dense x [A, B, ...] as [B, A, ...] (the two leading dimensions swapped, nothing moved).
Tensor leading_swapped(const Tensor& x) {
  Tensor t = x;
  std::swap(t.shape[0], t.shape[1]);
  std::swap(t.strides[0], t.strides[1]);
  return t;
}

}  // namespace

void ImageSplit::set_displaced(bool displaced) {
  HD_CHECK(!displaced || keeps_sites_, "image split: a displaced forward needs a split that keeps its sites");
  displaced_ = displaced;
}

void ImageSplit::begin_forward(const Shape& input) {
  sites_ = &sites_by_input_[std::vector<int64_t>(input.begin(), input.end())];
  HD_CHECK(!displaced_ || !sites_->empty(), "image split: a displaced forward of ", input.to_string(),
           " needs an exact one of that shape before it");
  next_site_ = 0;
  in_flight_ = false;
}

void ImageSplit::end_forward() {
  HD_CHECK(!displaced_ || next_site_ == sites_->size(), "image split: a displaced forward made ", next_site_,
           " exchanges where the one before made ", sites_->size());
#if defined(HD_WITH_GPU)
  if (in_flight_) {
    const Device& d = group_.device();
    gpu::stream_wait(d, gpu::native_stream(d), gpu::side_stream(d));
  }
#endif
  in_flight_ = false;
}

ImageSplit::Site& ImageSplit::site_for(const Tensor& fresh) {
  Shape gathered = fresh.shape;
  gathered[0] *= strips();
  HD_CHECK(sites_ != nullptr, "image split: an exchange outside begin_forward and end_forward");
  if (next_site_ == sites_->size()) {
    HD_CHECK(!displaced_, "image split: a displaced forward made more exchanges than the one before");
    sites_->push_back(Site{OwnedTensor::like(fresh, fresh.shape), OwnedTensor::like(fresh, gathered)});
  }
  Site& site = (*sites_)[next_site_++];
  HD_CHECK(site.sent.view().shape == fresh.shape && site.sent.view().dtype == fresh.dtype,
           "image split: exchange ", next_site_ - 1, " sends ", fresh.describe(), " where the forward before sent ",
           site.sent.view().describe(), " (a displaced run's forwards must have the same shapes)");
  return site;
}

void ImageSplit::exchange(Site& site, const Tensor& fresh) {
  HD_ASSERT(displaced_);
  // `fresh` may be rewritten by what follows on the device's stream; the copy in `sent` stays until the
  // next forward's same site, after end_forward's join.
  ops::copy(fresh, site.sent);
  const Device& d = group_.device();
  if (d.is_cpu()) return group_.all_gather(site.sent, site.gathered);
#if defined(HD_WITH_GPU)
  // The side stream gathers once the device's stream has queued this site's reads of the old values.
  gpu::stream_wait(d, gpu::side_stream(d), gpu::native_stream(d));
  const gpu::ExternalStream on_side(d, gpu::side_stream(d));
  group_.all_gather(site.sent, site.gathered);
  in_flight_ = true;
#endif
}

OwnedTensor ImageSplit::interleaved(const Tensor& gathered, int64_t n) const {
  Shape whole{n, strips() * gathered.dim(1)}, parts{strips()}, out_parts{n, strips()};
  for (int d = 2; d < gathered.rank(); ++d) whole.push_back(gathered.dim(d));
  OwnedTensor out = OwnedTensor::like(gathered, whole);
  // [strips, N, rows, ...] seen as [N, strips, rows, ...]
  parts.push_back(n);
  for (int d = 1; d < gathered.rank(); ++d) parts.push_back(gathered.dim(d)), out_parts.push_back(gathered.dim(d));
  ops::copy(leading_swapped(gathered.reshape(parts)), out.view().reshape(out_parts));
  return out;
}

void ImageSplit::conv(const Tensor& x, const Tensor& weight, const Tensor& bias, int stride, const Tensor* residual,
                      const Tensor& out) {
  const int64_t kernel = weight.dim(1);
  if (kernel == 1) return ops::conv2d(x, weight, &bias, residual, {stride, 0, 0}, out);
  HD_CHECK_KIND(kernel == 3 && weight.dim(2) == 3 && (stride == 1 || stride == 2), ErrorKind::kUnsupported,
                "image split: a ", kernel, "x", weight.dim(2), " convolution of stride ", stride,
                " (3x3 of stride 1 or 2, and 1x1, are split)");
  HD_CHECK(x.rank() == 4 && x.is_contiguous(), "image split: a strip ", x.describe(), " must be dense [N, h, W, C]");
  const int64_t n = x.dim(0), h = x.dim(1), w = x.dim(2), c = x.dim(3);
  HD_CHECK(stride == 1 || h % 2 == 0, "image split: a stride-2 convolution of a strip of ", h,
           " rows (strips of an even height line up with the whole image's)");
  // This strip's first and last row, [N, 2, W, C] (one copy: rows 0 and h - 1 as a view with a row stride
  // of h - 1 rows); every strip's, gathered.
  OwnedTensor edges = OwnedTensor::like(x, Shape{n, 2, w, c});
  Tensor first_and_last = x.slice(1, 0, 1);
  first_and_last.shape[1] = 2;
  first_and_last.strides[1] = (h - 1) * w * c;
  ops::copy(first_and_last, edges);
  OwnedTensor gathered_now;
  Site* site = keeps_sites_ ? &site_for(edges) : nullptr;
  if (!displaced_) {
    if (site == nullptr) gathered_now = OwnedTensor::like(x, Shape{strips() * n, 2, w, c});
    const Tensor& into = site ? site->gathered.view() : gathered_now.view();
    group_.all_gather(edges, into);
  }
  // Displaced: the neighbours' rows of the previous forward, still in the site.
  const Tensor all_edges = site ? site->gathered.view() : gathered_now.view();
  // The strip with the last row of the strip above and the first of the strip below (zeros at the image's
  // edges) and a column of zeros either side: the padded input, convolved without padding. A stride-2
  // kernel never reads the last row.
  const auto strip_edges = [&](int strip) { return all_edges.slice(0, strip * n, n); };
  const Tensor above = index() > 0 ? strip_edges(index() - 1).slice(1, 1, 1) : Tensor();
  const Tensor below = index() + 1 < strips() ? strip_edges(index() + 1).slice(1, 0, 1) : Tensor();
  OwnedTensor padded = OwnedTensor::like(x, Shape{n, h + 2, w + 2, c});
  ops::surround_strip(x, index() > 0 ? &above : nullptr, index() + 1 < strips() ? &below : nullptr, padded);
  ops::conv2d(padded, weight, &bias, residual, {stride, 0, 0}, out);
  if (displaced_) exchange(*site, edges);
}

void ImageSplit::group_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, int groups, float eps,
                            bool fuse_silu, const Tensor& out) {
  HD_CHECK(x.rank() == 4, "image split: a strip ", x.describe(), " must be [N, h, W, C]");
  const int64_t n = x.dim(0);
  OwnedTensor statistics(Shape{n, groups, 2}, DType::kF32, x.device);
  ops::group_statistics(x, groups, statistics);
  Site* site = keeps_sites_ ? &site_for(statistics) : nullptr;
  OwnedTensor parts_now;  // every strip's statistics, unless the site holds them
  if (!site || displaced_) parts_now = OwnedTensor(Shape{strips() * n, groups, 2}, DType::kF32, x.device);
  const Tensor parts = site && !displaced_ ? site->gathered.view() : parts_now.view();
  if (!displaced_) {
    group_.all_gather(statistics, parts);
  } else {
    // The other strips' statistics of the previous forward, this strip's of this one.
    ops::copy(site->gathered, parts);
    ops::copy(statistics, parts.slice(0, index() * n, n));
  }
  // Every strip has this one's pixels: the split is even.
  const std::vector<int64_t> pixels(size_t(strips()), x.dim(1) * x.dim(2));
  OwnedTensor affine(Shape{n, x.dim(3), 2}, DType::kF32, x.device);
  ops::group_norm_combine(parts.reshape(Shape{strips(), n, groups, 2}), pixels, gamma, beta, eps, affine);
  ops::group_norm_apply(x, affine, fuse_silu, out);
  if (displaced_) exchange(*site, statistics);
}

OwnedTensor ImageSplit::gather_keys_values(const Tensor& kv) {
  HD_CHECK(kv.rank() == 3 && kv.is_contiguous(), "image split: keys and values ", kv.describe(),
           " must be dense [2N, L, C]");
  const int64_t rows = kv.dim(0), tokens = kv.dim(1);
  Site* site = keeps_sites_ ? &site_for(kv) : nullptr;
  if (!displaced_) {
    if (site == nullptr) return gather_strips(kv);
    group_.all_gather(kv, site->gathered);
    return interleaved(site->gathered, rows);
  }
  // The other strips' keys and values of the previous forward, this strip's of this one.
  OwnedTensor all = interleaved(site->gathered, rows);
  ops::copy(kv, all.view().slice(1, index() * tokens, tokens));
  exchange(*site, kv);
  return all;
}

OwnedTensor ImageSplit::gather_strips(const Tensor& x) const {
  HD_CHECK(x.rank() >= 2 && x.is_contiguous(), "image split: ", x.describe(), " must be dense [N, rows, ...]");
  Shape by_strip = x.shape;
  by_strip[0] *= strips();
  if (x.dim(0) == 1) {  // a lone sample's strips are already side by side
    Shape whole = x.shape;
    whole[1] *= strips();
    OwnedTensor out = OwnedTensor::like(x, whole);
    group_.all_gather(x, out.view().reshape(by_strip));
    return out;
  }
  OwnedTensor gathered = OwnedTensor::like(x, by_strip);
  group_.all_gather(x, gathered);
  return interleaved(gathered, x.dim(0));
}

}  // namespace hd::comm
