// Small text helpers the front ends share.
#pragma once

#include <string_view>
#include <vector>

namespace hd {

// The items of a list separated by `separator` ("a,b,,c" -> "a", "b", "", "c"; "" -> one empty item), as
// views of `text`. Empty items are kept, so that each caller can refuse them with its own message.
std::vector<std::string_view> split_list(std::string_view text, char separator = ',');

}  // namespace hd
