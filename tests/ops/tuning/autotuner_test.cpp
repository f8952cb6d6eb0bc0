// The autotuner's choices and its cache file: timed once, remembered, read back by a later process
// (simulated by pointing the tuner at the file again), retuned when the cached candidate is gone.
#include "ops/tuning/autotuner.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "core/error.h"
#include "test_util.h"

namespace hd {
namespace {

std::string read_all(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Restores the default cache path after each test, so that no test writes to the user's cache.
class Autotuner : public ::testing::Test {
 protected:
  ~Autotuner() override { ops::set_tune_cache_path(""); }
  test::TempDir dir_;
};

TEST_F(Autotuner, TimesOnceKeepsTheFastestAndWritesItDown) {
  const auto file = dir_.path() / "sub" / "tuning.tsv";  // the folder is created
  ops::set_tune_cache_path(file.string());
  int timed = 0;
  const auto times = [&](int i) {
    ++timed;
    return std::vector<double>{3.0, 1.5, 2.0}[size_t(i)];
  };
  EXPECT_EQ(ops::choose_fastest("conv A", {"a", "b", "c"}, times), 1);
  EXPECT_EQ(timed, 3);
  EXPECT_EQ(ops::choose_fastest("conv A", {"a", "b", "c"}, times), 1);  // remembered: not timed again
  EXPECT_EQ(timed, 3);
  EXPECT_EQ(read_all(file), "conv A\tb\t1.5\n");

  // A later run reads the file: no timing at all.
  ops::set_tune_cache_path(file.string());
  EXPECT_EQ(ops::choose_fastest("conv A", {"a", "b", "c"},
                                [&](int) -> double {
                                  ADD_FAILURE() << "timed";
                                  return 1;
                                }),
            1);
  // The list may change order: the choice is by name.
  EXPECT_EQ(ops::choose_fastest("conv A", {"c", "b"},
                                [&](int) -> double {
                                  ADD_FAILURE() << "timed";
                                  return 1;
                                }),
            1);
}

TEST_F(Autotuner, RetunesWhenTheCachedCandidateIsGoneAndTheLastLineWins) {
  const auto file = dir_.write("tuning.tsv", std::string("k\told\t1\ntorn line\nk2\tx\t1\nk2\ty\t2\n"));
  ops::set_tune_cache_path(file.string());
  int timed = 0;
  EXPECT_EQ(ops::choose_fastest("k", {"p", "q"},
                                [&](int i) {
                                  ++timed;
                                  return i == 0 ? 5.0 : 4.0;
                                }),
            1);
  EXPECT_EQ(timed, 2);  // "old" no longer exists
  EXPECT_EQ(ops::choose_fastest("k2", {"x", "y"},
                                [&](int) -> double {
                                  ADD_FAILURE() << "timed";
                                  return 1;
                                }),
            1);
  EXPECT_NE(read_all(file).find("k\tq\t4\n"), std::string::npos);  // appended
}

TEST_F(Autotuner, SkipsCandidatesThatCannotRunAndFailsWhenNoneCan) {
  ops::set_tune_cache_path("");  // memory only
  EXPECT_EQ(ops::choose_fastest("m", {"broken", "slow"}, [](int i) { return i == 0 ? -1.0 : 9.0; }), 1);
  EXPECT_THROW(ops::choose_fastest("n", {"a", "b"}, [](int) { return -1.0; }), Error);
  EXPECT_EQ(ops::choose_fastest("one", {"only"},
                                [](int) -> double {
                                  ADD_FAILURE() << "timed";
                                  return 1;
                                }),
            0);
}

TEST_F(Autotuner, AnUnwritableCacheCostsOnlyTheTiming) {
  const auto file = dir_.write("not-a-folder", std::string("x"));
  ops::set_tune_cache_path((file / "tuning.tsv").string());  // a path under a regular file
  EXPECT_EQ(ops::choose_fastest("k", {"a", "b"}, [](int i) { return i == 0 ? 2.0 : 1.0; }), 1);
}

// --kernels / $HD_KERNELS: two words, anything else refused with where it came from.
TEST(KernelChoice, ParsesOwnAndAllAndNamesTheSourceOfAnythingElse) {
  EXPECT_EQ(ops::parse_kernel_choice("own", "--kernels"), ops::KernelChoice::kOwn);
  EXPECT_EQ(ops::parse_kernel_choice("all", "--kernels"), ops::KernelChoice::kAll);
  for (const char* bad : {"", "Own", "vendor", "own "}) {
    try {
      ops::parse_kernel_choice(bad, "HD_KERNELS");
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
      EXPECT_NE(std::string(e.what()).find("HD_KERNELS must be 'own'"), std::string::npos) << e.what();
    }
  }
  const ops::KernelChoice before = ops::kernel_choice();
  ops::set_kernel_choice(ops::KernelChoice::kOwn);
  EXPECT_EQ(ops::kernel_choice(), ops::KernelChoice::kOwn);
  EXPECT_STREQ(ops::kernel_choice_name(ops::kernel_choice()), "own");
  ops::set_kernel_choice(before);
}

}  // namespace
}  // namespace hd
