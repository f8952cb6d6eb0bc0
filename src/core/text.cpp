#include "core/text.h"

namespace hd {

std::vector<std::string_view> split_list(std::string_view text, char separator) {
  std::vector<std::string_view> items;
  size_t start = 0;
  for (;;) {
    const size_t end = text.find(separator, start);
    items.push_back(text.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    if (end == std::string_view::npos) return items;
    start = end + 1;
  }
}

}  // namespace hd
