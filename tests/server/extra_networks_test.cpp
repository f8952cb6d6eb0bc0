// A1111's <lora:NAME:SCALE> tags taken out of a prompt, and the other extra networks refused.
#include "tools/server/extra_networks.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "test_util.h"

namespace hd::server {
namespace {

TEST(ExtraNetworks, LoraTagsLeaveThePromptInOrder) {
  const PromptNetworks n =
      take_extra_networks("a <lora:detail:0.8> cat, <lora:style.v2> (oil:1.2) <lora:x:-1.5e-1>", "p");
  EXPECT_EQ(n.prompt, "a  cat,  (oil:1.2) ");
  ASSERT_EQ(n.loras.size(), 3u);
  EXPECT_EQ(n.loras[0].name, "detail");
  EXPECT_EQ(n.loras[0].scale, 0.8f);
  EXPECT_EQ(n.loras[1].name, "style.v2");
  EXPECT_EQ(n.loras[1].scale, 1.0f);  // A1111's default
  EXPECT_EQ(n.loras[2].scale, -0.15f);
  const PromptNetworks none = take_extra_networks("a cat <3 > dog", "p");
  EXPECT_EQ(none.prompt, "a cat <3 > dog");
  EXPECT_TRUE(none.loras.empty());
}

TEST(ExtraNetworks, OtherNetworksAndFormsAreRefusedByTag) {
  test::expect_error_containing([] { take_extra_networks("a <hypernet:anime:1> cat", "the prompt"); },
                                "the prompt: A1111's extra network <hypernet:anime:1> is not applied");
  test::expect_error_containing([] { take_extra_networks("<lyco:x:1>", "the prompt"); }, "<lyco:x:1>");
  test::expect_error_containing([] { take_extra_networks("<lora:x:0.5:0.7>", "p"); },
                                "separate text-encoder and UNet scales are not supported");
  test::expect_error_containing([] { take_extra_networks("<lora:x:te=0.5>", "p"); }, "one finite number");
  test::expect_error_containing([] { take_extra_networks("<lora:x:nan>", "p"); }, "one finite number");
  test::expect_error_containing([] { take_extra_networks("<lora::1>", "p"); }, "names no LoRA");
}

}  // namespace
}  // namespace hd::server
