#include "core/error.h"

#include <gtest/gtest.h>

namespace hd {
namespace {

TEST(Error, ContextIsAppendedInnermostFirst) {
  try {
    with_context([]() -> int { with_context([]() -> int { HD_CHECK(false, "bad shape ", 3); return 0; },
                                            [] { return std::string("while loading x"); });
                               return 0; },
                 [] { return std::string("in model.safetensors"); });
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
    EXPECT_EQ(e.message(), "bad shape 3");
    EXPECT_STREQ(e.what(), "bad shape 3 (while loading x; in model.safetensors)");
  }
}

TEST(Error, AssertReportsLocation) {
  try {
    HD_ASSERT(1 + 1 == 3);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInternal);
    EXPECT_NE(std::string(e.what()).find("error_test.cpp"), std::string::npos);
  }
}

}  // namespace
}  // namespace hd
