#include "io/checkpoint_format.h"

#include <gtest/gtest.h>

#include <vector>

#include "core/error.h"

namespace hd {
namespace {

TEST(CheckpointFormat, SniffsByContentNotName) {
  const std::vector<uint8_t> zip{'P', 'K', 3, 4, 20, 0};
  const std::vector<uint8_t> pickle{0x80, 2, ']', 'q'};
  const std::vector<uint8_t> gguf{'G', 'G', 'U', 'F', 3, 0};
  const std::vector<uint8_t> st{2, 0, 0, 0, 0, 0, 0, 0, '{', '}'};
  EXPECT_EQ(sniff_checkpoint_format(zip), CheckpointFormat::kPickleZip);
  EXPECT_EQ(sniff_checkpoint_format(pickle), CheckpointFormat::kPickleRaw);
  EXPECT_EQ(sniff_checkpoint_format(gguf), CheckpointFormat::kGguf);
  EXPECT_EQ(sniff_checkpoint_format(st), CheckpointFormat::kSafetensors);
  EXPECT_EQ(sniff_checkpoint_format(std::vector<uint8_t>{}), CheckpointFormat::kUnknown);
}

TEST(CheckpointFormat, PickleIsRefusedWithConversionAdvice) {
  for (auto format : {CheckpointFormat::kPickleZip, CheckpointFormat::kPickleRaw}) {
    try {
      require_safetensors("sd.ckpt", format);
      FAIL();
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("sd.ckpt"), std::string::npos);
      EXPECT_NE(what.find("never unpickles"), std::string::npos);
      EXPECT_NE(what.find("safetensors"), std::string::npos);
    }
  }
  EXPECT_NO_THROW(require_safetensors("x", CheckpointFormat::kSafetensors));
  EXPECT_THROW(require_safetensors("x", CheckpointFormat::kUnknown), Error);
}

}  // namespace
}  // namespace hd
