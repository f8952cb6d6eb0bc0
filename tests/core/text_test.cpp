#include "core/text.h"

#include <gtest/gtest.h>

#include <string_view>
#include <vector>

namespace hd {
namespace {

using Items = std::vector<std::string_view>;

TEST(SplitList, KeepsEveryItemEmptyOnesIncluded) {
  EXPECT_EQ(split_list("cuda:0,cuda:1"), (Items{"cuda:0", "cuda:1"}));
  EXPECT_EQ(split_list("one"), (Items{"one"}));
  EXPECT_EQ(split_list(""), (Items{""}));
  EXPECT_EQ(split_list("a,,b,"), (Items{"a", "", "b", ""}));
  EXPECT_EQ(split_list(",a"), (Items{"", "a"}));
  EXPECT_EQ(split_list("512x512;768x512", ';'), (Items{"512x512", "768x512"}));
}

}  // namespace
}  // namespace hd
