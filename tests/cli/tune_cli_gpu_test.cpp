// `hipdiffusion tune` and the tuning policies through the CLI on a GPU with the tiny SD1.x fixture: tune
// fills the cache with exhaustive choices for each size, a later generate at those sizes tunes nothing,
// (nor asks a library's heuristics again: their answers are noted in the cache too), and a quick
// generate at a new size tunes only its new shapes, tagged quick or taken from a near size's choice,
// which an exhaustive run then replaces.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <string>

#include "cli/cli_runner.h"
#include "test_util.h"

namespace hd {
namespace {

const std::string kModel = std::string(HD_SOURCE_DIR) + "/tests/fixtures/models/tiny_sd1";

struct CacheLines {
  int quick = 0, near = 0, exhaustive = 0;  // choices by how they were made
  int notes = 0, near_notes = 0;  // the libraries' heuristics' answers, and a neighbour's kept for a problem
};

CacheLines count_lines(const std::filesystem::path& file) {
  std::ifstream in(file);
  CacheLines c;
  std::string line;
  while (std::getline(in, line)) {
    (line.ends_with("\tnote\tnear") ? c.near_notes
     : line.ends_with("\tnote")     ? c.notes
     : line.ends_with("\tquick")    ? c.quick
     : line.ends_with("\tnear")     ? c.near
                                    : c.exhaustive) += 1;
  }
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

  EXPECT_GT(after_tune.notes, 0);  // cuDNN's and cuBLASLt's heuristics, asked while tuning

  // The same sizes: every choice is in the cache, and every library answer: nothing is appended.
  for (const char* size : {"--width 32 --height 32", "--width 48 --height 32"}) {
    const auto r = test::run_cli("generate" + common + " --prompt x --steps 2 " + size + " --output " +
                                 test::quoted(dir.path() / "a.png"));
    ASSERT_EQ(r.exit_code, 0) << r.out;
  }
  const CacheLines after_generate = count_lines(cache);
  EXPECT_EQ(after_generate.exhaustive, after_tune.exhaustive);
  EXPECT_EQ(after_generate.quick + after_generate.near, 0);
  EXPECT_EQ(after_generate.notes, after_tune.notes);

  // A new size under the default (quick) policy: its new shapes only, most taken from the tuned sizes'
  // choices (48x32 is within 4x of 64x64 at every level) ...
  const auto quick = test::run_cli("generate" + common + " --prompt x --steps 1 --width 64 --height 64 --output " +
                                   test::quoted(dir.path() / "b.png"));
  ASSERT_EQ(quick.exit_code, 0) << quick.out;
  EXPECT_NE(quick.out.find(" of them from a near size's choice"), std::string::npos) << quick.out;
  const CacheLines after_quick = count_lines(cache);
  EXPECT_GT(after_quick.near, 0);
  EXPECT_EQ(after_quick.exhaustive, after_tune.exhaustive);
  // ... which tune, exhaustive, replaces with choices of its own.
  const auto retuned = test::run_cli("tune" + common + " --size 64x64");
  ASSERT_EQ(retuned.exit_code, 0) << retuned.out;
  EXPECT_GE(count_lines(cache).exhaustive - after_quick.exhaustive, after_quick.quick + after_quick.near);
}

// A later process rebuilds every library plan from the cache (its choices and the libraries' noted
// answers, not their heuristics): the same picture, bit for bit, as the process that tuned. The same
// holds at a near size, whose choices (and cuDNN's engine rankings) came from the tuned size's.
TEST(TuneCli, ALaterRunRebuildsTheSamePlansFromTheCache) {
  const test::TempDir dir;
  const auto cache = dir.path() / "tuning.tsv";
  // Runs generate at `size`, writing `png`; the cache's lines after it.
  const auto generate = [&](const std::string& size, const std::string& png) {
    const auto r =
        test::run_cli("generate --model " + kModel + " --device cuda:0 --tune-cache " + test::quoted(cache) +
                      " --prompt x --steps 2 " + size + " --output " + test::quoted(dir.path() / png));
    EXPECT_EQ(r.exit_code, 0) << r.out;
    return count_lines(cache);
  };
  const auto bytes = [&](const std::string& png) {
    std::ifstream in(dir.path() / png, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  };
  const std::string tuned_size = "--width 64 --height 64", near_size = "--width 64 --height 48";
  const CacheLines tuned = generate(tuned_size, "first.png");
  EXPECT_GT(tuned.notes, 0);
  const CacheLines after = generate(tuned_size, "later.png");
  EXPECT_EQ(after.notes, tuned.notes);  // nothing asked again
  EXPECT_EQ(after.quick, tuned.quick);
  EXPECT_FALSE(bytes("first.png").empty());
  EXPECT_EQ(bytes("first.png"), bytes("later.png"));

  const CacheLines near = generate(near_size, "near.png");
  EXPECT_GT(near.near, 0);
  const CacheLines near_again = generate(near_size, "near-again.png");
  EXPECT_EQ(near_again.near, near.near);
  EXPECT_EQ(near_again.quick, near.quick);
  EXPECT_EQ(near_again.notes, near.notes);
  EXPECT_EQ(near_again.near_notes, near.near_notes);
  EXPECT_FALSE(bytes("near.png").empty());
  EXPECT_EQ(bytes("near.png"), bytes("near-again.png"));
}

}  // namespace
}  // namespace hd
