#include "io/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace hd {

MappedFile::MappedFile(const std::string& path) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  HD_CHECK(fd >= 0, path, ": cannot open: ", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    throw Error(ErrorKind::kRuntime, str_cat(path, ": cannot stat: ", std::strerror(err)));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(ErrorKind::kInvalidInput,
                str_cat(path, S_ISDIR(st.st_mode) ? ": is a directory, not a file" : ": not a regular file"));
  }
  size_ = size_t(st.st_size);
  if (size_ > 0) {  // mmap of length 0 fails; an empty file is reported by the format check instead
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    const int err = errno;
    ::close(fd);
    HD_CHECK_KIND(p != MAP_FAILED, ErrorKind::kRuntime, path, ": cannot map: ", std::strerror(err));
    data_ = static_cast<const uint8_t*>(p);
  } else {
    ::close(fd);
  }
}

void MappedFile::release_pages(size_t offset, size_t length) const noexcept {
  const size_t page = size_t(::sysconf(_SC_PAGESIZE));
  if (data_ == nullptr || offset >= size_ || page == 0) return;
  const size_t end = std::min(size_, offset + length);
  const uintptr_t first = (reinterpret_cast<uintptr_t>(data_) + offset + page - 1) / page * page;
  const uintptr_t last = (reinterpret_cast<uintptr_t>(data_) + end) / page * page;
  // Advice only: a refusal costs memory, never correctness (the mapping is read-only).
  if (first < last) (void)::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

void MappedFile::populate(const std::function<bool()>& keep_going) const noexcept {
  constexpr size_t kChunk = size_t(64) << 20;  // a multiple of every page size
  for (size_t offset = 0; data_ != nullptr && offset < size_ && keep_going(); offset += kChunk) {
    void* start = const_cast<uint8_t*>(data_) + offset;
    const size_t length = std::min(kChunk, size_ - offset);
#if defined(MADV_POPULATE_READ)
    if (::madvise(start, length, MADV_POPULATE_READ) == 0) continue;
#endif
    (void)::madvise(start, length, MADV_WILLNEED);
  }
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
}

}  // namespace hd
