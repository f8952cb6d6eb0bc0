// A1111's <lora:NAME:SCALE> and <lora:NAME:TE:UNET> tags taken out of a prompt, and the other extra
// networks refused.
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
  for (const auto& l : n.loras) EXPECT_FALSE(l.unet_scale.has_value()) << l.name;
  const PromptNetworks none = take_extra_networks("a cat <3 > dog", "p");
  EXPECT_EQ(none.prompt, "a cat <3 > dog");
  EXPECT_TRUE(none.loras.empty());
}

// A1111's text-encoder and UNet scales (extra_networks_lora.py): by position, the UNet's defaulting to the
// text encoders'; te= and unet= by name, over the positions.
TEST(ExtraNetworks, LoraTagsTakeTheTextEncodersAndTheUnetsScales) {
  const PromptNetworks n =
      take_extra_networks("<lora:a:0.5:0.75> <lora:b:te=0.25> <lora:c:1:unet=0> <lora:d:0.5:te=2:1.5>", "p");
  ASSERT_EQ(n.loras.size(), 4u);
  EXPECT_EQ(n.loras[0].scale, 0.5f);
  EXPECT_EQ(n.loras[0].unet_scale, 0.75f);
  EXPECT_EQ(n.loras[1].scale, 0.25f);
  EXPECT_FALSE(n.loras[1].unet_scale.has_value());  // the text encoders' then
  EXPECT_EQ(n.loras[2].scale, 1.0f);
  EXPECT_EQ(n.loras[2].unet_scale, 0.0f);
  EXPECT_EQ(n.loras[3].scale, 2.0f);
  EXPECT_EQ(n.loras[3].unet_scale, 1.5f);
}

TEST(ExtraNetworks, OtherNetworksAndFormsAreRefusedByTag) {
  test::expect_error_containing([] { take_extra_networks("a <hypernet:anime:1> cat", "the prompt"); },
                                "the prompt: A1111's extra network <hypernet:anime:1> is not applied");
  test::expect_error_containing([] { take_extra_networks("<lyco:x:1>", "the prompt"); }, "<lyco:x:1>");
  test::expect_error_containing([] { take_extra_networks("<lora:x:0.5:0.7:8>", "p"); },
                                "dyn, is not applied");
  test::expect_error_containing([] { take_extra_networks("<lora:x:dyn=8>", "p"); },
                                "'dyn=' is not applied by this server");
  test::expect_error_containing([] { take_extra_networks("<lora:x:nan>", "p"); },
                                "'nan' is not a finite number");
  test::expect_error_containing([] { take_extra_networks("<lora:x:1:unet=>", "p"); },
                                "'' is not a finite number");
  test::expect_error_containing([] { take_extra_networks("<lora::1>", "p"); }, "names no LoRA");
  test::expect_error_containing([] { take_extra_networks("<lora:te=1>", "p"); }, "names no LoRA");
  test::expect_error_containing([] { take_extra_networks("<lora:unet=0.5:te=1>", "p"); }, "names no LoRA");
}

}  // namespace
}  // namespace hd::server
