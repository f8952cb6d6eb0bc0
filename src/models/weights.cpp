#include "models/weights.h"

#include <cstring>

#include "core/error.h"
#include "core/thread_pool.h"
#include "io/safetensors.h"
#include "ops/cpu/cpu_ops.h"

namespace hd {

namespace {

// Elements per parallel chunk: large enough that the pool's hand-off is noise beside the copy.
constexpr int64_t kGrain = int64_t(1) << 18;

// Gathers `count` elements of `size` bytes, `stride` elements apart, into a dense run.
void gather(const uint8_t* src, int64_t stride, int64_t count, size_t size, uint8_t* dst) {
  if (size == 2) {
    for (int64_t i = 0; i < count; ++i) std::memcpy(dst + 2 * i, src + 2 * i * stride, 2);
  } else {
    for (int64_t i = 0; i < count; ++i) std::memcpy(dst + 4 * i, src + 4 * i * stride, 4);
  }
}

// The stored weight `src` (`numel` elements of `from`, in diffusers' layout [out, ...]) plus each of its
// LoRA deltas, in f32: W + Σ scale · up · down, one sgemm each.
std::vector<float> with_deltas(const TensorRef& t, const uint8_t* src, DType from, int64_t numel) {
  std::vector<float> merged(static_cast<size_t>(numel));
  convert(src, from, merged.data(), DType::kF32, size_t(numel));
  for (const LowRankDelta& d : t.deltas) {
    const OwnedTensor up = d.file->load(*d.up, DType::kF32), down = d.file->load(*d.down, DType::kF32);
    const int64_t out = d.up->shape[0], rank = d.up->shape[1], in = d.down->numel / rank;
    HD_CHECK(out * in == numel, "LoRA ", d.file->name(), ": '", d.up->name, "' does not fit '", t.name, "'");
    ops::cpu::sgemm(false, false, out, in, rank, d.scale, up.view().ptr<float>(), rank,
                    down.view().ptr<float>(), in, 1.0f, merged.data(), in);
  }
  return merged;
}

}  // namespace

nlohmann::json component_config(const ModelComponent& component) {
  if (!component.config_json) return nlohmann::json::object();
  auto j = nlohmann::json::parse(*component.config_json, nullptr, false);
  HD_CHECK(!j.is_discarded() && j.is_object(), component.name, "/config.json is not a JSON object");
  return j;
}

WeightReader::WeightReader(const ModelComponent& component, std::string prefix, ops::Placement placement)
    : component_(component), prefix_(std::move(prefix)), placement_(placement) {
  placement_.validate();
  if (placement_.device.is_gpu()) uploader_ = std::make_shared<ops::WeightUploader>(placement_.device);
}

bool WeightReader::has(std::string_view name) const { return component_.find(prefix_ + std::string(name)) != nullptr; }

bool WeightReader::held(std::string_view name) const {
  return find(name).held.has_value();
}

const TensorRef& WeightReader::find(std::string_view name) const {
  const std::string full = prefix_ + std::string(name);
  const TensorRef* t = component_.find(full);
  HD_CHECK(t != nullptr, component_.name, ": missing tensor '", component_.prefix, full, "'");
  return *t;
}

std::vector<int64_t> WeightReader::shape(std::string_view name) const { return find(name).shape(); }

void WeightReader::check_shape(const TensorRef& t, std::string_view name, const Shape& expected) const {
  const std::vector<int64_t> stored = t.shape();
  Shape actual;
  const bool fits = stored.size() <= size_t(kMaxRank);
  for (size_t i = 0; fits && i < stored.size(); ++i) actual.push_back(stored[i]);
  HD_CHECK(fits && actual == expected, component_.name, ": tensor '", component_.prefix, prefix_, name, "'",
           component_.mapped_from_ldm ? " (mapped from the single file's names)" : "", " has shape ",
           fits ? actual.to_string() : "of rank > 6", ", expected ", expected.to_string());
}

OwnedTensor WeightReader::placed(const TensorRef& t, const Shape& shape, Relayout relayout) const {
  if (t.held) return borrowed(t, shape);
  const SafetensorsEntry& e = *t.entry;
  HD_CHECK_KIND(e.dtype.has_value() && is_floating(*e.dtype), ErrorKind::kUnsupported, component_.name,
                ": tensor '", component_.prefix, t.name, "' has dtype ", e.dtype_name,
                "; only F32, F16 and BF16 weights load");
  const DType to = placement_.dtype;
  const int64_t numel = shape.numel();
  const uint8_t* src =
      t.file->raw_rows(e, t.first_row, t.row_count > 0 ? t.row_count : (e.shape.empty() ? 1 : e.shape[0])).data();
  // A weight a LoRA changes is merged in f32 first and placed from there (lora.h: never a transposed one).
  std::vector<float> merged;
  DType from = *e.dtype;
  if (!t.deltas.empty()) {
    HD_CHECK(!t.transposed, component_.name, ": a LoRA cannot change the transposed '", t.name, "'");
    merged = with_deltas(t, src, from, numel);
    src = reinterpret_cast<const uint8_t*>(merged.data());
    from = DType::kF32;
  }
  const size_t from_size = dtype_size(from), to_size = dtype_size(to);

  // One pass from the mapping into `dst`, in parallel chunks. Both relayouts transpose the last two
  // dimensions of [blocks, cols, rows] into [blocks, rows, cols]: a transposed matrix is one block, a
  // convolution kernel [O, I, kh·kw] one block per output channel. Each output row is gathered in the
  // stored dtype, then converted.
  const auto fill = [&](void* dst_void) {
    auto* dst = static_cast<uint8_t*>(dst_void);
    ThreadPool& pool = ThreadPool::global();
    if (relayout == Relayout::kNone) {
      pool.parallel_for(numel, kGrain, [&](int64_t begin, int64_t end) {
        convert(src + size_t(begin) * from_size, from, dst + size_t(begin) * to_size, to, size_t(end - begin));
      });
      return;
    }
    const bool matrix = relayout == Relayout::kTransposed;
    const int64_t blocks = matrix ? 1 : shape[0], rows = matrix ? shape[0] : shape[1] * shape[2];
    const int64_t cols = matrix ? shape[1] : shape[3];
    pool.parallel_for(blocks * rows, std::max<int64_t>(1, kGrain / std::max<int64_t>(cols, 1)),
                      [&](int64_t begin, int64_t end) {
                        std::vector<uint8_t> row(size_t(cols) * from_size);
                        for (int64_t i = begin; i < end; ++i) {
                          const int64_t block = i / rows, r = i % rows;
                          gather(src + size_t(block * rows * cols + r) * from_size, rows, cols, from_size, row.data());
                          convert(row.data(), from, dst + size_t(i * cols) * to_size, to, size_t(cols));
                        }
                      });
  };

  OwnedTensor result = [&] {
    if (placement_.device.is_gpu()) return uploader_->upload(shape, to, fill);
    OwnedTensor host(shape, to);
    if (numel > 0) fill(host.view().data);
    return host;
  }();
  t.file->release_pages(e);
  return result;
}

OwnedTensor WeightReader::borrowed(const TensorRef& t, const Shape& shape) const {
  // A held tensor is already in the engine's layout (shape() only reports a kernel as diffusers holds
  // it), so any relayout is a new shape over the same memory. Converting it would copy the caller's
  // weights, which is what holding them avoids: the caller converts its model instead.
  const Tensor& h = *t.held;
  HD_CHECK_KIND(h.dtype == placement_.dtype && h.device == placement_.device, ErrorKind::kUnsupported,
                component_.name, ": tensor '", t.name, "' is ", h.describe(), " but the model computes in ",
                placement_.to_string(), "; convert the model's weights to that first");
  return OwnedTensor::borrowed(h.reshape(shape));
}

OwnedTensor WeightReader::load(std::string_view name, const Shape& expected) const {
  const TensorRef& t = find(name);
  check_shape(t, name, expected);
  if (!t.transposed) return placed(t, expected, Relayout::kNone);
  HD_CHECK(expected.rank() == 2 && t.row_count == 0, component_.name, ": only a whole matrix can be stored transposed ('", name, "')");
  return placed(t, expected, Relayout::kTransposed);
}

OwnedTensor WeightReader::load_conv(std::string_view name, int64_t out, int64_t in, int64_t kh, int64_t kw) const {
  const TensorRef& t = find(name);
  check_shape(t, name, Shape{out, in, kh, kw});
  HD_CHECK(!t.transposed, component_.name, ": a convolution kernel cannot be stored transposed ('", name, "')");
  return placed(t, Shape{out, kh, kw, in}, Relayout::kConvToNhwc);
}

}  // namespace hd
