// Reader for the safetensors format: an 8-byte little-endian header length N, N bytes of JSON header,
// then the tensor data. The file is memory-mapped; nothing is copied until a tensor is loaded.
//
// Opening validates everything the format's reference implementation validates, and a little more:
// header length (<= 100 MB, inside the file), header UTF-8 JSON object starting with '{',
// `__metadata__` a string-to-string map, known dtypes, non-negative shapes whose element and byte counts
// do not overflow, byte length == shape x dtype size, offsets inside the data, offsets sorted and
// contiguous with no gap or overlap, no trailing bytes, no duplicate tensor names. Every failure is an
// Error whose message names the file, the tensor and the problem.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/tensor.h"

namespace hd {

class MappedFile;

inline constexpr uint64_t kSafetensorsMaxHeaderBytes = 100'000'000;  // as in the reference implementation

struct SafetensorsEntry {
  std::string name;
  std::string dtype_name;      // as written in the file: "F16", "BF16", "F32", "I64", ...
  size_t element_size = 0;     // bytes per element of that dtype
  std::optional<DType> dtype;  // the engine's dtype, where the engine can load this one
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // byte offsets into the data section
  int64_t numel = 0;
  uint64_t nbytes() const { return end - begin; }
};

class SafetensorsFile {
 public:
  // Maps and validates `path`.
  static SafetensorsFile open(const std::string& path);
  // Validates bytes held by the caller, who keeps them alive; `name` stands for the file in messages.
  static SafetensorsFile from_bytes(std::span<const uint8_t> bytes, std::string name);

  const std::string& name() const { return name_; }
  // Sorted by name.
  const std::vector<SafetensorsEntry>& entries() const { return entries_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  uint64_t data_bytes() const { return data_.size(); }

  const SafetensorsEntry* find(std::string_view tensor_name) const;
  // Throws "missing tensor" naming the file when absent.
  const SafetensorsEntry& at(std::string_view tensor_name) const;
  std::span<const uint8_t> raw(const SafetensorsEntry& e) const { return data_.subspan(e.begin, e.nbytes()); }
  // The bytes of rows [first, first + count) of the first dimension (the whole tensor for a scalar);
  // throws naming the tensor when they are not all inside it.
  std::span<const uint8_t> raw_rows(const SafetensorsEntry& e, int64_t first, int64_t count) const;
  // Lets the process's resident memory drop the mapped pages of `e` once it has been read
  // (MappedFile::release_pages); nothing for bytes held by the caller.
  void release_pages(const SafetensorsEntry& e) const;
  // Maps the file's pages in ahead of loading while keep_going() says (MappedFile::populate); nothing for
  // bytes held by the caller.
  void populate_pages(const std::function<bool()>& keep_going) const;

  // A zero-copy view into the mapping. Requires a dtype the engine knows, a rank <= kMaxRank and data
  // aligned for its element type (a valid file need not align offsets; load() always works).
  Tensor view(const SafetensorsEntry& e) const;
  // A host copy converted to `as` (f32, f16 or bf16), whatever the alignment in the file.
  OwnedTensor load(const SafetensorsEntry& e, DType as) const;
  // Rows [first, first + count) of the first dimension only, converted likewise (one of several
  // matrices stored fused in one tensor).
  OwnedTensor load_rows(const SafetensorsEntry& e, int64_t first, int64_t count, DType as) const;

 private:
  SafetensorsFile() = default;
  void parse_and_validate(std::span<const uint8_t> bytes);

  std::shared_ptr<MappedFile> file_;  // null for from_bytes
  std::string name_;
  std::span<const uint8_t> data_;
  std::vector<SafetensorsEntry> entries_;
  std::map<std::string, std::string> metadata_;
};

// The bytes of a valid safetensors file holding `tensors` (written in name order) and `metadata`.
// Used by tests and tools that make small checkpoints.
struct SafetensorsWriteItem {
  std::string name;
  std::string dtype_name;
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;
};
std::vector<uint8_t> serialize_safetensors(std::vector<SafetensorsWriteItem> tensors,
                                           const std::map<std::string, std::string>& metadata = {});

}  // namespace hd
