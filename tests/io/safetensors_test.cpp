#include "io/safetensors.h"

#include <gtest/gtest.h>

#include <cstring>

#include "core/error.h"
#include "test_util.h"

namespace hd {
namespace {

// A file image: little-endian header length, the header text as given, then `data_bytes` bytes.
std::vector<uint8_t> raw_file(const std::string& header, size_t data_bytes = 0, uint64_t declared = UINT64_MAX) {
  const uint64_t n = declared == UINT64_MAX ? header.size() : declared;
  std::vector<uint8_t> b(8);
  for (int i = 0; i < 8; ++i) b[i] = uint8_t(n >> (8 * i));
  b.insert(b.end(), header.begin(), header.end());
  for (size_t i = 0; i < data_bytes; ++i) b.push_back(uint8_t(i * 7));
  return b;
}

// Expects validation to fail with a message holding every one of `parts` (the file name is always one).
void expect_invalid(const std::vector<uint8_t>& bytes, std::initializer_list<std::string> parts) {
  try {
    SafetensorsFile::from_bytes(bytes, "bad.safetensors");
    ADD_FAILURE() << "accepted an invalid file";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput) << what;
    EXPECT_NE(what.find("bad.safetensors"), std::string::npos) << what;
    for (const auto& p : parts) EXPECT_NE(what.find(p), std::string::npos) << "'" << p << "' not in: " << what;
  }
}

std::string tensor_json(const std::string& name, const std::string& dtype, const std::string& shape,
                        const std::string& offsets) {
  return "\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape + ",\"data_offsets\":" + offsets + "}";
}

TEST(Safetensors, ReadsWhatTheWriterWrites) {
  test::Rng rng;
  HD_SEED_TRACE(rng);
  std::vector<float> w(6);
  for (float& v : w) v = rng.normal();
  std::vector<uint8_t> half_bytes(6);
  for (int i = 0; i < 3; ++i) {
    const uint16_t h = float_to_half(w[i]).bits;
    std::memcpy(&half_bytes[2 * i], &h, 2);
  }
  const auto bytes = serialize_safetensors(
      {{"z.weight", "F32", {2, 3}, test::f32_bytes(w)},
       {"a.half", "F16", {3}, half_bytes},
       {"position_ids", "I64", {1, 2}, std::vector<uint8_t>(16, 0)},
       {"empty", "F32", {0, 4}, {}}},
      {{"format", "pt"}});
  const auto st = SafetensorsFile::from_bytes(bytes, "ok.safetensors");
  ASSERT_EQ(st.entries().size(), 4u);
  EXPECT_EQ(st.entries()[0].name, "a.half");  // sorted by name
  EXPECT_EQ(st.metadata().at("format"), "pt");
  const auto& z = st.at("z.weight");
  EXPECT_EQ(z.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(z.dtype, DType::kF32);
  const OwnedTensor loaded = st.load(z, DType::kF32);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(loaded.ptr<float>()[i], w[i]);
  const OwnedTensor widened = st.load(st.at("a.half"), DType::kF32);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(widened.ptr<float>()[i], half_to_float(float_to_half(w[i])));
  const OwnedTensor second_row = st.load_rows(z, 1, 1, DType::kF32);  // [1, 3]
  EXPECT_EQ(second_row.view().shape, (Shape{1, 3}));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(second_row.ptr<float>()[i], w[3 + i]);
  EXPECT_THROW(st.load_rows(z, 1, 2, DType::kF32), Error);
  EXPECT_EQ(st.at("position_ids").dtype, DType::kI64);
  EXPECT_THROW(st.load(st.at("position_ids"), DType::kF32), Error);
  EXPECT_EQ(st.at("empty").numel, 0);
  EXPECT_EQ(st.load(st.at("empty"), DType::kF16).view().shape, (Shape{0, 4}));  // found by the fuzzer: UB once
  EXPECT_EQ(st.find("missing"), nullptr);
  try {
    st.at("missing.weight");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("missing tensor 'missing.weight'"), std::string::npos);
  }
}

TEST(Safetensors, AcceptsEmptyHeaderAndPadding) {
  EXPECT_EQ(SafetensorsFile::from_bytes(raw_file("{}"), "e").entries().size(), 0u);
  EXPECT_EQ(SafetensorsFile::from_bytes(raw_file("{}      "), "e").entries().size(), 0u);
}

TEST(Safetensors, ZeroCopyViewNeedsAlignment) {
  // An F16 tensor of 3 elements (6 bytes) pushes the following F32 tensor off 4-byte alignment.
  const auto bytes = serialize_safetensors(
      {{"a", "F16", {3}, test::zero_bytes(6)}, {"b", "F32", {2}, test::f32_bytes({1.5f, -2.0f})}});
  std::vector<uint64_t> storage((bytes.size() + 7) / 8);  // 8-aligned copy of the file
  std::memcpy(storage.data(), bytes.data(), bytes.size());
  const auto st = SafetensorsFile::from_bytes({reinterpret_cast<const uint8_t*>(storage.data()), bytes.size()}, "a");
  EXPECT_NO_THROW(st.view(st.at("a")));
  EXPECT_THROW(st.view(st.at("b")), Error);
  const OwnedTensor b = st.load(st.at("b"), DType::kF32);  // loading always works
  EXPECT_EQ(b.ptr<float>()[0], 1.5f);
  EXPECT_EQ(b.ptr<float>()[1], -2.0f);
}

TEST(SafetensorsValidation, FileTooSmall) { expect_invalid({1, 2, 3}, {"too small"}); }

TEST(SafetensorsValidation, HeaderLengthOverLimit) {
  expect_invalid(raw_file("{}", 0, kSafetensorsMaxHeaderBytes + 1), {"exceeds the limit"});
}

TEST(SafetensorsValidation, HeaderLengthPastEndOfFile) {
  expect_invalid(raw_file("{}", 0, 4000), {"runs past the end of the file"});
  expect_invalid(raw_file("{}", 0, UINT64_MAX - 1), {"exceeds the limit"});
}

TEST(SafetensorsValidation, HeaderMustStartWithBrace) {
  expect_invalid(raw_file(" {}"), {"must start with '{'"});
  expect_invalid(raw_file("[1]"), {"must start with '{'"});
  expect_invalid(raw_file(""), {"must start with '{'"});
}

TEST(SafetensorsValidation, HeaderMustBeJson) {
  expect_invalid(raw_file("{\"a\":"), {"not valid JSON"});
  expect_invalid(raw_file("{} trailing"), {"not valid JSON"});
  expect_invalid(raw_file("{}\x01"), {"not valid JSON"});
}

TEST(SafetensorsValidation, HeaderMustBeUtf8) {
  expect_invalid(raw_file("{\"__metadata__\":{\"k\":\"\xff\xfe\"}}"), {"not valid JSON", "UTF-8"});
  expect_invalid(raw_file("{\"\xc3\x28\":{}}"), {"not valid JSON", "UTF-8"});
}

TEST(SafetensorsValidation, EntriesMustBeObjects) {
  expect_invalid(raw_file("{\"w\":5}"), {"tensor 'w'", "must be an object"});
  expect_invalid(raw_file("{\"w\":[1,2]}"), {"tensor 'w'"});
}

TEST(SafetensorsValidation, MetadataMustMapStringsToStrings) {
  expect_invalid(raw_file("{\"__metadata__\":{\"k\":1}}"), {"__metadata__", "'k' must be a string"});
  expect_invalid(raw_file("{\"__metadata__\":{\"k\":{\"x\":\"y\"}}}"), {"__metadata__"});
  expect_invalid(raw_file("{\"__metadata__\":\"text\"}"), {"__metadata__ must be an object of strings"});
  expect_invalid(raw_file("{\"__metadata__\":{},\"__metadata__\":{}}"), {"__metadata__ appears twice"});
}

TEST(SafetensorsValidation, UnknownDtype) {
  expect_invalid(raw_file("{" + tensor_json("w", "F17", "[1]", "[0,4]") + "}", 4), {"tensor 'w'", "unknown dtype 'F17'"});
  expect_invalid(raw_file("{\"w\":{\"dtype\":3,\"shape\":[1],\"data_offsets\":[0,4]}}", 4), {"'dtype' must be a string"});
}

TEST(SafetensorsValidation, ShapeMustBeNonNegativeIntegers) {
  expect_invalid(raw_file("{" + tensor_json("w", "F32", "[-1]", "[0,4]") + "}", 4), {"tensor 'w'", "negative dimension"});
  expect_invalid(raw_file("{" + tensor_json("w", "F32", "[1.5]", "[0,4]") + "}", 4), {"non-integer"});
  expect_invalid(raw_file("{" + tensor_json("w", "F32", "\"1\"", "[0,4]") + "}", 4), {"'shape' must be an array"});
  expect_invalid(raw_file("{" + tensor_json("w", "F32", "[[1]]", "[0,4]") + "}", 4), {"not allowed"});
}

TEST(SafetensorsValidation, ShapeProductOverflow) {
  expect_invalid(raw_file("{" + tensor_json("w", "F32", "[4294967296,4294967296]", "[0,4]") + "}", 4),
                 {"tensor 'w'", "element count of the shape overflows"});
  expect_invalid(raw_file("{" + tensor_json("w", "F64", "[4611686018427387904]", "[0,4]") + "}", 4),
                 {"tensor 'w'", "byte count of the shape overflows"});
}

TEST(SafetensorsValidation, ByteLengthMustMatchShapeTimesDtype) {
  expect_invalid(raw_file("{" + tensor_json("w", "F32", "[2]", "[0,4]") + "}", 4),
                 {"tensor 'w'", "span 4 bytes", "need 8"});
}

TEST(SafetensorsValidation, OffsetsMustBeInsideTheData) {
  expect_invalid(raw_file("{" + tensor_json("w", "F32", "[2]", "[0,8]") + "}", 4), {"tensor 'w'", "run past the data"});
  expect_invalid(raw_file("{" + tensor_json("w", "F32", "[1]", "[4,0]") + "}", 4), {"end before they begin"});
  expect_invalid(raw_file("{" + tensor_json("w", "F32", "[1]", "[0]") + "}", 4), {"exactly two numbers"});
  expect_invalid(raw_file("{" + tensor_json("w", "F32", "[1]", "[0,4,8]") + "}", 4), {"exactly two numbers"});
  expect_invalid(raw_file("{" + tensor_json("w", "F32", "[1]", "[-4,0]") + "}", 4), {"negative data offset"});
}

TEST(SafetensorsValidation, NoGapBetweenTensors) {
  expect_invalid(raw_file("{" + tensor_json("a", "F32", "[1]", "[0,4]") + "," + tensor_json("b", "F32", "[1]", "[8,12]") + "}", 12),
                 {"tensor 'b'", "gap of 4 bytes"});
  expect_invalid(raw_file("{" + tensor_json("a", "F32", "[1]", "[4,8]") + "}", 8), {"tensor 'a'", "gap"});
}

TEST(SafetensorsValidation, NoOverlapBetweenTensors) {
  expect_invalid(raw_file("{" + tensor_json("a", "F32", "[2]", "[0,8]") + "," + tensor_json("b", "F32", "[1]", "[4,8]") + "}", 8),
                 {"overlaps tensor 'a'"});
}

TEST(SafetensorsValidation, NoTrailingBytes) {
  expect_invalid(raw_file("{" + tensor_json("a", "F32", "[1]", "[0,4]") + "}", 6), {"2 trailing bytes"});
  expect_invalid(raw_file("{}", 1), {"1 trailing bytes"});
}

TEST(SafetensorsValidation, NoDuplicateNames) {
  expect_invalid(raw_file("{" + tensor_json("a", "F32", "[1]", "[0,4]") + "," + tensor_json("a", "F32", "[1]", "[4,8]") + "}", 8),
                 {"tensor 'a'", "duplicate tensor name"});
}

TEST(SafetensorsValidation, EntriesNeedAllFields) {
  expect_invalid(raw_file("{\"w\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4), {"tensor 'w'", "missing 'dtype'"});
  expect_invalid(raw_file("{\"w\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4), {"missing 'shape'"});
  expect_invalid(raw_file("{\"w\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4), {"missing 'data_offsets'"});
  expect_invalid(raw_file("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"x\":1}}", 4), {"unknown field 'x'"});
}

TEST(SafetensorsFileOpen, RefusesPicklesAndReportsMissingFiles) {
  test::TempDir dir;
  const auto zip = dir.write("model.safetensors", std::vector<uint8_t>{'P', 'K', 3, 4, 0, 0, 0, 0, 0, 0});
  try {
    SafetensorsFile::open(zip.string());
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("pickle"), std::string::npos) << e.what();
  }
  EXPECT_THROW(SafetensorsFile::open((dir.path() / "absent.safetensors").string()), Error);
  EXPECT_THROW(SafetensorsFile::open(dir.path().string()), Error);
  const auto empty = dir.write("empty.safetensors", std::vector<uint8_t>{});
  EXPECT_THROW(SafetensorsFile::open(empty.string()), Error);
  const auto good = dir.write("good.safetensors", serialize_safetensors({{"x", "F32", {1}, test::f32_bytes({2.0f})}}));
  const auto st = SafetensorsFile::open(good.string());
  EXPECT_EQ(st.view(st.at("x")).ptr<float>()[0], 2.0f);  // mmap is page-aligned, so the view is allowed
}

}  // namespace
}  // namespace hd
