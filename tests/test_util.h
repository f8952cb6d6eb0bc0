// Helpers shared by the tests: fresh random data, error norms, temporary files.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace hd::test {

// A generator seeded freshly for each test (from std::random_device), or from HD_TEST_SEED when set so
// that a failure can be replayed. The seed is printed with every failure of the calling test.
class Rng {
 public:
  Rng();
  uint64_t seed() const { return seed_; }
  std::mt19937_64& engine() { return engine_; }
  float normal(float mean = 0.0f, float stddev = 1.0f);
  float uniform(float lo, float hi);
  int64_t integer(int64_t lo, int64_t hi);  // inclusive

 private:
  uint64_t seed_;
  std::mt19937_64 engine_;
};

// Expects `f` to throw an hd::Error whose message contains `text` (a test failure naming the message, or
// saying that nothing was thrown, otherwise).
void expect_error_containing(const std::function<void()>& f, const std::string& text);

// Records the seed in the test's failure messages.
#define HD_SEED_TRACE(rng) SCOPED_TRACE(::testing::Message() << "seed " << (rng).seed() << " (set HD_TEST_SEED to replay)")

OwnedTensor random_tensor(Rng& rng, Shape shape, float stddev = 1.0f);
// A tensor full of NaN, so that any element an op fails to write is caught.
OwnedTensor poisoned_tensor(Shape shape);
// A host f32 tensor's elements in index order, whatever its strides (a view of a wider tensor too).
std::vector<float> to_vector(const Tensor& t);
std::vector<double> to_doubles(const Tensor& t);

// ‖a − b‖₂ / ‖b‖₂ in double; b is the reference. Infinite when a holds NaN or Inf.
double relative_l2(const std::vector<float>& a, const std::vector<double>& reference);
double relative_l2(const Tensor& a, const std::vector<double>& reference);
double max_abs_diff(const Tensor& a, const std::vector<double>& reference);
// Peak signal-to-noise ratio in dB of an image with values in [0, 1] against its reference.
double psnr(const Tensor& image, const std::vector<double>& reference);

// A directory under the system temp dir, removed with everything in it when this goes out of scope.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path write(const std::string& name, const std::vector<uint8_t>& bytes) const;
  std::filesystem::path write(const std::string& name, const std::string& text) const;

 private:
  std::filesystem::path path_;
};

// Little-endian bytes of f32 values / of an f16 encoding of them, for building safetensors fixtures.
std::vector<uint8_t> f32_bytes(const std::vector<float>& values);
std::vector<uint8_t> zero_bytes(size_t n);

}  // namespace hd::test
