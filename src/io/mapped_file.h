// A read-only memory map of a whole file. Checkpoints are mapped, never read into memory: a 2 GB
// checkpoint costs no allocation, and only the pages a tensor touches are read from disk.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace hd {

class MappedFile {
 public:
  explicit MappedFile(const std::string& path);  // throws Error naming the path and the system error
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::span<const uint8_t> bytes() const { return {data_, size_}; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace hd
