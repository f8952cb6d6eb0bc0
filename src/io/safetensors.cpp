#include "io/safetensors.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"
#include "io/checkpoint_format.h"
#include "io/mapped_file.h"

namespace hd {

namespace {

struct DTypeInfo {
  std::string_view name;
  size_t size;
  std::optional<DType> engine;
};

// Every dtype of the format. Entries the engine cannot compute with still validate, so that `info`
// can describe any well-formed file.
constexpr DTypeInfo kDTypes[] = {
    {"BOOL", 1, std::nullopt},    {"U8", 1, std::nullopt},       {"I8", 1, std::nullopt},
    {"F8_E5M2", 1, std::nullopt}, {"F8_E4M3", 1, std::nullopt},  {"I16", 2, std::nullopt},
    {"U16", 2, std::nullopt},     {"F16", 2, DType::kF16},       {"BF16", 2, DType::kBF16},
    {"I32", 4, DType::kI32},      {"U32", 4, std::nullopt},      {"F32", 4, DType::kF32},
    {"F64", 8, std::nullopt},     {"I64", 8, DType::kI64},       {"U64", 8, std::nullopt},
};

const DTypeInfo* find_dtype(std::string_view name) {
  for (const auto& d : kDTypes)
    if (d.name == name) return &d;
  return nullptr;
}

using json = nlohmann::json;

// Streams the header through nlohmann's SAX parser and checks the schema as it goes: the whole header
// is never materialised as a DOM, and a hostile header (deep nesting, huge arrays) is refused at the
// first byte that breaks the schema.
class HeaderParser : public nlohmann::json_sax<json> {
 public:
  explicit HeaderParser(const std::string& file) : file_(file) {}

  std::vector<SafetensorsEntry> entries;
  std::map<std::string, std::string> metadata;

  bool start_object(std::size_t) override {
    switch (state_) {
      case State::kTop: state_ = State::kTopObject; return true;
      case State::kEntryValue:
        if (key_ == "__metadata__") {
          state_ = State::kMetadata;
        } else {
          state_ = State::kTensor;
          entries.emplace_back().name = key_;
          has_dtype_ = has_shape_ = has_offsets_ = false;
        }
        return true;
      default: fail(where(), "unexpected object");
    }
  }

  bool key(string_t& k) override {
    if (state_ == State::kTopObject) {
      if (!seen_.insert(k).second) {
        fail(k == "__metadata__" ? "header" : "tensor '" + k + "'",
             k == "__metadata__" ? "__metadata__ appears twice" : "duplicate tensor name");
      }
      key_ = k;
      state_ = State::kEntryValue;
    } else if (state_ == State::kMetadata) {
      key_meta_ = k;
      state_ = State::kMetadataValue;
    } else if (state_ == State::kTensor) {
      if (k == "dtype") {
        state_ = State::kDType;
      } else if (k == "shape") {
        state_ = State::kShapeStart;
      } else if (k == "data_offsets") {
        state_ = State::kOffsetsStart;
      } else {
        fail(where(), "unknown field '" + k + "'");
      }
    } else {
      HD_ASSERT(false);
    }
    return true;
  }

  bool string(string_t& s) override {
    if (state_ == State::kMetadataValue) {
      metadata[key_meta_] = s;
      state_ = State::kMetadata;
    } else if (state_ == State::kDType) {
      const DTypeInfo* d = find_dtype(s);
      if (d == nullptr) fail(where(), "unknown dtype '" + s + "'");
      auto& e = entries.back();
      e.dtype_name = std::string(d->name);
      e.element_size = d->size;
      e.dtype = d->engine;
      has_dtype_ = true;
      state_ = State::kTensor;
    } else {
      unexpected("a string");
    }
    return true;
  }

  bool start_array(std::size_t) override {
    if (state_ == State::kShapeStart) {
      state_ = State::kShape;
    } else if (state_ == State::kOffsetsStart) {
      state_ = State::kOffsets;
      offsets_.clear();
    } else {
      unexpected("an array");
    }
    return true;
  }

  bool end_array() override {
    if (state_ == State::kShape) {
      has_shape_ = true;
    } else if (state_ == State::kOffsets) {
      if (offsets_.size() != 2) fail(where(), "data_offsets must hold exactly two numbers");
      if (offsets_[1] < offsets_[0]) fail(where(), "data_offsets end before they begin");
      entries.back().begin = offsets_[0];
      entries.back().end = offsets_[1];
      has_offsets_ = true;
    } else {
      HD_ASSERT(false);
    }
    state_ = State::kTensor;
    return true;
  }

  bool number_unsigned(number_unsigned_t v) override {
    if (state_ == State::kShape) {
      if (entries.back().shape.size() >= 64) fail(where(), "shape has more than 64 dimensions");
      if (v > uint64_t(std::numeric_limits<int64_t>::max())) fail(where(), "shape dimension too large");
      entries.back().shape.push_back(int64_t(v));
    } else if (state_ == State::kOffsets) {
      if (offsets_.size() >= 2) fail(where(), "data_offsets must hold exactly two numbers");
      offsets_.push_back(v);
    } else {
      unexpected("a number");
    }
    return true;
  }

  bool number_integer(number_integer_t v) override {
    // nlohmann reports non-negative integers through number_unsigned, so this is a negative one.
    if (state_ == State::kShape) fail(where(), "negative dimension " + std::to_string(v) + " in shape");
    if (state_ == State::kOffsets) fail(where(), "negative data offset");
    unexpected("a number");
  }

  bool number_float(number_float_t, const string_t& text) override {
    if (state_ == State::kShape || state_ == State::kOffsets)
      fail(where(), "non-integer number " + text + " where an integer is needed");
    unexpected("a number");
  }

  bool end_object() override {
    if (state_ == State::kTensor) {
      if (!has_dtype_) fail(where(), "missing 'dtype'");
      if (!has_shape_) fail(where(), "missing 'shape'");
      if (!has_offsets_) fail(where(), "missing 'data_offsets'");
      state_ = State::kTopObject;
    } else if (state_ == State::kMetadata) {
      state_ = State::kTopObject;
    } else if (state_ == State::kTopObject) {
      state_ = State::kDone;
    } else {
      HD_ASSERT(false);
    }
    return true;
  }

  bool null() override { unexpected("null"); }
  bool boolean(bool) override { unexpected("a boolean"); }
  bool binary(binary_t&) override { unexpected("binary data"); }

  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& ex) override {
    // nlohmann's message names the byte position and, for bad UTF-8, says so.
    std::string what = ex.what();
    if (const size_t p = what.find("] "); p != std::string::npos) what = what.substr(p + 2);
    throw Error(ErrorKind::kInvalidInput, str_cat(file_, ": header is not valid JSON: ", what));
  }

 private:
  enum class State {
    kTop, kTopObject, kEntryValue, kMetadata, kMetadataValue, kTensor, kDType,
    kShapeStart, kShape, kOffsetsStart, kOffsets, kDone
  };

  std::string where() const {
    if (state_ == State::kMetadata || state_ == State::kMetadataValue) return "__metadata__";
    if (state_ == State::kTop || state_ == State::kTopObject) return "header";
    return "tensor '" + key_ + "'";
  }

  [[noreturn]] void fail(const std::string& where, const std::string& problem) const {
    throw Error(ErrorKind::kInvalidInput, str_cat(file_, ": ", where, ": ", problem));
  }

  [[noreturn]] void unexpected(const char* what) const {
    switch (state_) {
      case State::kTop: fail("header", "the header must be a JSON object");
      case State::kEntryValue:
        fail(where(), key_ == "__metadata__" ? "__metadata__ must be an object of strings"
                                             : "entry must be an object");
      case State::kMetadataValue: fail("__metadata__", "value of '" + key_meta_ + "' must be a string");
      case State::kDType: fail(where(), "'dtype' must be a string");
      case State::kShapeStart: fail(where(), "'shape' must be an array");
      case State::kOffsetsStart: fail(where(), "'data_offsets' must be an array");
      default: fail(where(), std::string(what) + " is not allowed here");
    }
  }

  const std::string& file_;
  State state_ = State::kTop;
  std::string key_, key_meta_;
  std::set<std::string> seen_;
  std::vector<uint64_t> offsets_;
  bool has_dtype_ = false, has_shape_ = false, has_offsets_ = false;
};

}  // namespace

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  auto file = std::make_shared<MappedFile>(path);
  // Refuse pickles and GGUF with their own message; anything else gets the precise validation error.
  const CheckpointFormat format = sniff_checkpoint_format(file->bytes());
  if (format == CheckpointFormat::kPickleZip || format == CheckpointFormat::kPickleRaw ||
      format == CheckpointFormat::kGguf) {
    require_safetensors(path, format);
  }
  SafetensorsFile st;
  st.file_ = file;
  st.name_ = path;
  st.parse_and_validate(file->bytes());
  return st;
}

SafetensorsFile SafetensorsFile::from_bytes(std::span<const uint8_t> bytes, std::string name) {
  SafetensorsFile st;
  st.name_ = std::move(name);
  st.parse_and_validate(bytes);
  return st;
}

void SafetensorsFile::parse_and_validate(std::span<const uint8_t> bytes) {
  const auto fail = [&](const std::string& problem) {
    return Error(ErrorKind::kInvalidInput, str_cat(name_, ": ", problem));
  };
  if (bytes.size() < 8) throw fail(str_cat("file of ", bytes.size(), " bytes is too small for a safetensors header"));
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | bytes[i];
  if (header_len > kSafetensorsMaxHeaderBytes)
    throw fail(str_cat("header length ", header_len, " exceeds the limit of ", kSafetensorsMaxHeaderBytes, " bytes"));
  if (header_len > bytes.size() - 8)
    throw fail(str_cat("header length ", header_len, " runs past the end of the file (", bytes.size(), " bytes)"));
  const auto header = bytes.subspan(8, header_len);
  if (header.empty() || header[0] != '{') throw fail("header must start with '{'");

  HeaderParser parser(name_);
  nlohmann::json::sax_parse(header.begin(), header.end(), &parser);
  data_ = bytes.subspan(8 + header_len);
  metadata_ = std::move(parser.metadata);
  entries_ = std::move(parser.entries);

  for (auto& e : entries_) {
    const auto bad = [&](const std::string& problem) { return fail(str_cat("tensor '", e.name, "': ", problem)); };
    uint64_t numel = 1;
    for (int64_t d : e.shape) {
      if (d != 0 && numel > uint64_t(std::numeric_limits<int64_t>::max()) / uint64_t(d))
        throw bad("element count of the shape overflows");
      numel *= uint64_t(d);
    }
    if (numel > std::numeric_limits<uint64_t>::max() / e.element_size) throw bad("byte count of the shape overflows");
    const uint64_t expected = numel * e.element_size;
    e.numel = int64_t(numel);
    if (e.nbytes() != expected)
      throw bad(str_cat("data_offsets span ", e.nbytes(), " bytes but shape and dtype ", e.dtype_name, " need ",
                        expected));
    if (e.end > data_.size())
      throw bad(str_cat("data_offsets [", e.begin, ", ", e.end, "] run past the data section of ", data_.size(),
                        " bytes"));
  }

  // Sorted by offset, the tensors must tile the data section exactly.
  std::vector<const SafetensorsEntry*> by_offset;
  for (const auto& e : entries_) by_offset.push_back(&e);
  std::sort(by_offset.begin(), by_offset.end(), [](const auto* a, const auto* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  uint64_t expected_begin = 0;
  const SafetensorsEntry* previous = nullptr;
  for (const auto* e : by_offset) {
    if (e->begin > expected_begin)
      throw fail(str_cat("tensor '", e->name, "': gap of ", e->begin - expected_begin, " bytes before its data"));
    if (e->begin < expected_begin)
      throw fail(str_cat("tensor '", e->name, "': data overlaps tensor '", previous->name, "'"));
    expected_begin = e->end;
    previous = e;
  }
  if (expected_begin != data_.size())
    throw fail(str_cat(data_.size() - expected_begin, " trailing bytes after the last tensor's data"));

  std::sort(entries_.begin(), entries_.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
}

const SafetensorsEntry* SafetensorsFile::find(std::string_view tensor_name) const {
  const auto it = std::lower_bound(entries_.begin(), entries_.end(), tensor_name,
                                   [](const SafetensorsEntry& e, std::string_view n) { return e.name < n; });
  return it != entries_.end() && it->name == tensor_name ? &*it : nullptr;
}

const SafetensorsEntry& SafetensorsFile::at(std::string_view tensor_name) const {
  const SafetensorsEntry* e = find(tensor_name);
  HD_CHECK(e != nullptr, name_, ": missing tensor '", tensor_name, "'");
  return *e;
}

namespace {
Shape to_shape(const std::string& file, const SafetensorsEntry& e) {
  HD_CHECK_KIND(e.shape.size() <= size_t(kMaxRank), ErrorKind::kUnsupported, file, ": tensor '", e.name,
                "': rank ", e.shape.size(), " exceeds the engine's maximum of ", kMaxRank);
  Shape s;
  for (int64_t d : e.shape) s.push_back(d);
  return s;
}
}  // namespace

Tensor SafetensorsFile::view(const SafetensorsEntry& e) const {
  HD_CHECK_KIND(e.dtype.has_value(), ErrorKind::kUnsupported, name_, ": tensor '", e.name, "' has dtype ",
                e.dtype_name, ", which hipDiffusion does not load");
  const uint8_t* p = data_.data() + e.begin;
  HD_CHECK_KIND(reinterpret_cast<uintptr_t>(p) % e.element_size == 0, ErrorKind::kUnsupported, name_,
                ": tensor '", e.name, "' is not aligned for zero-copy use; load it instead");
  return Tensor::contiguous(const_cast<uint8_t*>(p), *e.dtype, to_shape(name_, e));
}

void SafetensorsFile::release_pages(const SafetensorsEntry& e) const {
  if (!file_) return;
  file_->release_pages(size_t(data_.data() - file_->bytes().data()) + e.begin, e.nbytes());
}

void SafetensorsFile::populate_pages(const std::function<bool()>& keep_going) const {
  if (file_) file_->populate(keep_going);
}

OwnedTensor SafetensorsFile::load(const SafetensorsEntry& e, DType as) const {
  return load_rows(e, 0, e.shape.empty() ? 1 : e.shape[0], as);
}

std::span<const uint8_t> SafetensorsFile::raw_rows(const SafetensorsEntry& e, int64_t first, int64_t count) const {
  const int64_t rows = e.shape.empty() ? 1 : e.shape[0];
  HD_CHECK(first >= 0 && count >= 0 && first + count <= rows, name_, ": tensor '", e.name, "': rows [", first, ", ",
           first + count, ") out of its ", rows);
  const uint64_t row_bytes = rows ? e.nbytes() / uint64_t(rows) : 0;
  return raw(e).subspan(size_t(first) * row_bytes, size_t(count) * row_bytes);
}

OwnedTensor SafetensorsFile::load_rows(const SafetensorsEntry& e, int64_t first, int64_t count, DType as) const {
  HD_CHECK_KIND(e.dtype.has_value() && is_floating(*e.dtype), ErrorKind::kUnsupported, name_, ": tensor '",
                e.name, "' has dtype ", e.dtype_name, "; only F32, F16 and BF16 tensors load as ", dtype_name(as));
  const std::span<const uint8_t> bytes = raw_rows(e, first, count);
  Shape shape = to_shape(name_, e);
  if (!e.shape.empty()) shape[0] = count;
  OwnedTensor out(shape, as);
  const int64_t numel = shape.numel();
  if (numel == 0) return out;  // an empty tensor has no buffer to write into (memcpy(null, ..., 0) is UB)
  // convert reads through memcpy: offsets in a valid file need not be aligned.
  convert(bytes.data(), *e.dtype, out.view().data, as, size_t(numel));
  return out;
}

std::vector<uint8_t> serialize_safetensors(std::vector<SafetensorsWriteItem> tensors,
                                           const std::map<std::string, std::string>& metadata) {
  std::sort(tensors.begin(), tensors.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    header[t.name] = {{"dtype", t.dtype_name}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.data.size()}}};
    offset += t.data.size();
  }
  std::string text = header.dump();
  while (text.size() % 8 != 0) text += ' ';  // the reference pads with spaces to keep data 8-aligned
  std::vector<uint8_t> out(8);
  for (int i = 0; i < 8; ++i) out[i] = uint8_t(uint64_t(text.size()) >> (8 * i));
  out.insert(out.end(), text.begin(), text.end());
  for (const auto& t : tensors) out.insert(out.end(), t.data.begin(), t.data.end());
  return out;
}

}  // namespace hd
