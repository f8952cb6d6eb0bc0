// `hipdiffusion tune` and the tuning policies through the CLI on a GPU with the tiny SD1.x fixture: tune
// fills the cache with exhaustive choices for each size, a later generate at those sizes tunes nothing,
// and a quick generate at a new size tunes only its new shapes, tagged quick, which an exhaustive run
// then replaces.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "cli/cli_runner.h"
#include "test_util.h"

namespace hd {
namespace {

const std::string kModel = std::string(HD_SOURCE_DIR) + "/tests/fixtures/models/tiny_sd1";

struct CacheLines {
  int quick = 0, exhaustive = 0;
};

CacheLines count_lines(const std::filesystem::path& file) {
  std::ifstream in(file);
  CacheLines c;
  std::string line;
  while (std::getline(in, line)) (line.ends_with("\tquick") ? c.quick : c.exhaustive) += 1;
  return c;
}

TEST(TuneCli, FillsTheCacheSoThatGenerateTunesNothing) {
  const test::TempDir dir;
  const auto cache = dir.path() / "tuning.tsv";
  const std::string common = " --model " + kModel + " --device cuda:0 --tune-cache " + test::quoted(cache);
  const auto tuned = test::run_cli("tune" + common + " --size 32x32,48x32");
  ASSERT_EQ(tuned.exit_code, 0) << tuned.out;
  EXPECT_NE(tuned.out.find("32x32, batch 1, CFG 7.5: "), std::string::npos) << tuned.out;
  EXPECT_NE(tuned.out.find("48x32, batch 1, CFG 7.5: "), std::string::npos) << tuned.out;
  const CacheLines after_tune = count_lines(cache);
  EXPECT_GT(after_tune.exhaustive, 0);
  EXPECT_EQ(after_tune.quick, 0);

  // The same sizes: every choice is in the cache, nothing is appended.
  for (const char* size : {"--width 32 --height 32", "--width 48 --height 32"}) {
    const auto r = test::run_cli("generate" + common + " --prompt x --steps 2 " + size + " --output " +
                                 test::quoted(dir.path() / "a.png"));
    ASSERT_EQ(r.exit_code, 0) << r.out;
  }
  const CacheLines after_generate = count_lines(cache);
  EXPECT_EQ(after_generate.exhaustive, after_tune.exhaustive);
  EXPECT_EQ(after_generate.quick, 0);

  // A new size under the default (quick) policy: its new shapes only, tagged quick ...
  const auto quick = test::run_cli("generate" + common + " --prompt x --steps 1 --width 64 --height 64 --output " +
                                   test::quoted(dir.path() / "b.png"));
  ASSERT_EQ(quick.exit_code, 0) << quick.out;
  const CacheLines after_quick = count_lines(cache);
  EXPECT_GT(after_quick.quick, 0);
  EXPECT_EQ(after_quick.exhaustive, after_tune.exhaustive);
  // ... which tune, exhaustive, replaces with choices of its own.
  const auto retuned = test::run_cli("tune" + common + " --size 64x64");
  ASSERT_EQ(retuned.exit_code, 0) << retuned.out;
  EXPECT_GE(count_lines(cache).exhaustive - after_quick.exhaustive, after_quick.quick);
}

}  // namespace
}  // namespace hd
