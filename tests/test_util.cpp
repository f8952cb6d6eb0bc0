#include "test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>

#include "core/error.h"

namespace hd::test {

namespace {
uint64_t pick_seed() {
  if (const char* s = std::getenv("HD_TEST_SEED")) return std::strtoull(s, nullptr, 10);
  std::random_device rd;
  return (uint64_t(rd()) << 32) ^ rd();
}
}  // namespace

Rng::Rng() : seed_(pick_seed()), engine_(seed_) {}

void expect_error_containing(const std::function<void()>& f, const std::string& text) {
  try {
    f();
    ADD_FAILURE() << "no error was thrown; expected one containing \"" << text << "\"";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
  }
}

float Rng::normal(float mean, float stddev) { return std::normal_distribution<float>(mean, stddev)(engine_); }
float Rng::uniform(float lo, float hi) { return std::uniform_real_distribution<float>(lo, hi)(engine_); }
int64_t Rng::integer(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(engine_); }

OwnedTensor random_tensor(Rng& rng, Shape shape, float stddev) {
  OwnedTensor t(shape, DType::kF32);
  float* p = t.ptr<float>();
  for (int64_t i = 0; i < t.view().numel(); ++i) p[i] = rng.normal(0.0f, stddev);
  return t;
}

OwnedTensor poisoned_tensor(Shape shape) {
  OwnedTensor t(shape, DType::kF32);
  float* p = t.ptr<float>();
  for (int64_t i = 0; i < t.view().numel(); ++i) p[i] = std::numeric_limits<float>::quiet_NaN();
  return t;
}

std::vector<float> to_vector(const Tensor& t) {
  const float* p = t.ptr<float>();
  if (t.is_contiguous()) return std::vector<float>(p, p + t.numel());
  return to_vector(OwnedTensor::copy_of(t));
}

std::vector<double> to_doubles(const Tensor& t) {
  const std::vector<float> v = to_vector(t);
  return std::vector<double>(v.begin(), v.end());
}

double relative_l2(const std::vector<float>& a, const std::vector<double>& reference) {
  EXPECT_EQ(a.size(), reference.size());
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < a.size() && i < reference.size(); ++i) {
    if (!std::isfinite(a[i])) return std::numeric_limits<double>::infinity();
    num += (a[i] - reference[i]) * (a[i] - reference[i]);
    den += reference[i] * reference[i];
  }
  return den == 0.0 ? std::sqrt(num) : std::sqrt(num / den);
}

double relative_l2(const Tensor& a, const std::vector<double>& reference) {
  return relative_l2(to_vector(a), reference);
}

double max_abs_diff(const Tensor& a, const std::vector<double>& reference) {
  const std::vector<float> v = to_vector(a);
  EXPECT_EQ(v.size(), reference.size());
  double m = 0.0;
  for (size_t i = 0; i < v.size() && i < reference.size(); ++i) {
    if (!std::isfinite(v[i])) return std::numeric_limits<double>::infinity();
    m = std::max(m, std::abs(v[i] - reference[i]));
  }
  return m;
}

TempDir::TempDir() {
  std::string pattern = (std::filesystem::temp_directory_path() / "hd_test_XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::filesystem::path TempDir::write(const std::string& name, const std::vector<uint8_t>& bytes) const {
  const auto p = path_ / name;
  std::filesystem::create_directories(p.parent_path());
  std::ofstream out(p, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  return p;
}

std::filesystem::path TempDir::write(const std::string& name, const std::string& text) const {
  return write(name, std::vector<uint8_t>(text.begin(), text.end()));
}

std::vector<uint8_t> f32_bytes(const std::vector<float>& values) {
  std::vector<uint8_t> b(values.size() * 4);
  std::memcpy(b.data(), values.data(), b.size());
  return b;
}

std::vector<uint8_t> zero_bytes(size_t n) { return std::vector<uint8_t>(n, 0); }

}  // namespace hd::test

namespace hd::test {

double psnr(const Tensor& image, const std::vector<double>& reference) {
  double mse = 0.0;
  const float* p = image.ptr<float>();
  for (size_t i = 0; i < reference.size(); ++i) mse += (p[i] - reference[i]) * (p[i] - reference[i]);
  mse /= double(reference.size());
  return mse == 0.0 ? INFINITY : 10.0 * std::log10(1.0 / mse);
}

}  // namespace hd::test
