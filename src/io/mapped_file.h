// A read-only memory map of a whole file. Checkpoints are mapped, never read into memory: a 2 GB
// checkpoint costs no allocation, and only the pages a tensor touches are read from disk.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
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
  // Gives back the pages wholly inside [offset, offset + length) that this process has read: they leave
  // its resident memory (the system's page cache keeps them) and are read again if touched. A loader
  // calls it after converting a tensor, so that the file's pages do not count on top of the weights.
  void release_pages(size_t offset, size_t length) const noexcept;
  // Maps the file's pages into the process now (reading them from disk if they are not cached), from
  // the start, 64 MiB at a time for as long as keep_going() says, so that a loader's copies take no page
  // faults: for a side thread while the caller waits for something else (which then stops it; stopping
  // leaves the rest to be read as it is touched, so a file not in the page cache is never read whole
  // ahead of the loader). Advice only: where the system cannot (before Linux 5.14), it is asked to read
  // ahead instead.
  void populate(const std::function<bool()>& keep_going) const noexcept;

 private:
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace hd
