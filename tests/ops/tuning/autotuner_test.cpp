// The autotuner's choices and its cache file: timed once, remembered, read back by a later process
// (simulated by pointing the tuner at the file again), retuned when the cached candidate is gone.
#include "ops/tuning/autotuner.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
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

// Restores the default cache path after each test, so that no test writes to the user's cache, and the
// policy (the tests start from the default, quick, whatever $HD_TUNE says).
class Autotuner : public ::testing::Test {
 protected:
  Autotuner() { ops::set_tune_policy(ops::TunePolicy::kQuick); }
  ~Autotuner() override {
    ops::set_tune_cache_path("");
    ops::set_tune_policy(before_);
  }
  test::TempDir dir_;
  ops::TunePolicy before_ = ops::tune_policy();
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
  EXPECT_EQ(read_all(file), "conv A\tb\t1.5\tquick\n");

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
  EXPECT_NE(read_all(file).find("k\tq\t4\tquick\n"), std::string::npos);  // appended
}

TEST_F(Autotuner, KeepsLibraryNotesBesideTheChoicesAndTheLastNoteWins) {
  const auto file = dir_.write("tuning.tsv", std::string("k\tq\t1\nlib 9 on X: conv\told answer\tnote\n"));
  ops::set_tune_cache_path(file.string());
  EXPECT_EQ(ops::library_note("lib 9 on X: conv").value, "old answer");
  EXPECT_EQ(ops::library_note("lib 9 on X: other").value, "");
  ops::remember_library_note("lib 9 on X: conv", "E12.3=1 E7|");
  ops::remember_library_note("lib 9 on X: conv", "E12.3=1 E7|");  // unchanged: not written again
  ops::remember_library_note("lib 9 on X: gemm", "0000000000000001 00000000000000ff");
  EXPECT_EQ(read_all(file), "k\tq\t1\nlib 9 on X: conv\told answer\tnote\nlib 9 on X: conv\tE12.3=1 E7|\tnote\n"
                            "lib 9 on X: gemm\t0000000000000001 00000000000000ff\tnote\n");

  // A later process reads the notes back, and a note is never taken for a choice (nor a choice for a note).
  ops::set_tune_cache_path(file.string());
  EXPECT_EQ(ops::library_note("lib 9 on X: conv").value, "E12.3=1 E7|");
  EXPECT_EQ(ops::library_note("lib 9 on X: gemm").value, "0000000000000001 00000000000000ff");
  EXPECT_EQ(ops::library_note("k").value, "");
  int timed = 0;
  EXPECT_EQ(ops::choose_fastest("lib 9 on X: conv", {"old answer", "other"},
                                [&](int i) {
                                  ++timed;
                                  return i == 0 ? 5.0 : 4.0;
                                }),
            1);
  EXPECT_EQ(timed, 2);

  // Without a file, notes live in memory only.
  ops::set_tune_cache_path("");
  ops::remember_library_note("a", "b");
  EXPECT_EQ(ops::library_note("a").value, "b");
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

// The quick policy times the marked candidates briefly and tags its choice; an exhaustive run times every
// candidate fully and replaces a quick choice; a quick run takes an exhaustive choice as it is.
TEST_F(Autotuner, QuickTimesTheMarkedFewBrieflyAndExhaustiveRetunesTheirChoice) {
  const auto file = dir_.path() / "tuning.tsv";
  ops::set_tune_cache_path(file.string());
  const std::vector<std::string> names{"heuristic", "rule", "slow", "fastest"};
  const std::vector<bool> quick{true, true, false, false};
  std::vector<int> timed;
  std::vector<ops::TimingEffort> efforts;
  const auto times = [&](int i, ops::TimingEffort effort) {
    timed.push_back(i);
    efforts.push_back(effort);
    return std::vector<double>{2.0, 3.0, 9.0, 1.0}[size_t(i)];
  };
  EXPECT_EQ(ops::choose_fastest("k", names, times, quick), 0);
  EXPECT_EQ(timed, (std::vector<int>{0, 1}));
  EXPECT_EQ(efforts, (std::vector<ops::TimingEffort>(2, ops::TimingEffort::kBrief)));
  EXPECT_EQ(read_all(file), "k\theuristic\t2\tquick\n");

  ops::set_tune_policy(ops::TunePolicy::kExhaustive);
  ops::set_tune_cache_path(file.string());  // a later process reads the quick choice and retunes it
  timed.clear();
  efforts.clear();
  EXPECT_EQ(ops::choose_fastest("k", names, times, quick), 3);
  EXPECT_EQ(timed, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(efforts, (std::vector<ops::TimingEffort>(4, ops::TimingEffort::kFull)));
  EXPECT_EQ(read_all(file), "k\theuristic\t2\tquick\nk\tfastest\t1\n");

  ops::set_tune_policy(ops::TunePolicy::kQuick);
  ops::set_tune_cache_path(file.string());
  timed.clear();
  EXPECT_EQ(ops::choose_fastest("k", names, times, quick), 3);  // the exhaustive choice, untimed
  EXPECT_TRUE(timed.empty());
}

TEST_F(Autotuner, QuickFallsBackToTheOthersWhenNoMarkedCandidateCanRun) {
  ops::set_tune_cache_path("");
  std::vector<int> timed;
  const auto times = [&](int i, ops::TimingEffort) {
    timed.push_back(i);
    return i < 2 ? -1.0 : 5.0 - i;
  };
  EXPECT_EQ(ops::choose_fastest("k", {"a", "b", "c", "d"}, times, {true, true, false, false}), 3);
  EXPECT_EQ(timed, (std::vector<int>{0, 1, 2, 3}));
}

// Records which candidates a test's timing function ran, answering from `ms`.
class TimingLog {
 public:
  std::function<double(int, ops::TimingEffort)> answer(std::vector<double> ms) {
    return [this, ms](int i, ops::TimingEffort effort) {
      timed.push_back(i);
      efforts.push_back(effort);
      return ms[size_t(i)];
    };
  }
  std::vector<int> timed;
  std::vector<ops::TimingEffort> efforts;
};

// A new size of a known family takes the choice of its nearest neighbour that an earlier process
// measured (read from the cache file) after one run of it, and writes it down as a neighbour's; a later
// process reads that back; the exhaustive policy retunes it.
TEST_F(Autotuner, QuickTakesTheNearestMeasuredNeighboursChoiceAfterOneRun) {
  const auto file = dir_.path() / "tuning.tsv";
  ops::set_tune_cache_path(file.string());
  const std::vector<std::string> names{"a", "b", "c"};
  const std::string family = "gemm f16 on X: channels 320 -> 640";
  const std::string small = ops::sized_key(family, 1000, "2x32x32");
  const std::string large = ops::sized_key(family, 5000, "2x80x64");  // 5x: no neighbour of small
  ASSERT_EQ(small, family + " @ 1000 2x32x32");
  TimingLog log;
  EXPECT_EQ(ops::choose_fastest(small, names, log.answer({3, 1, 2})), 1);  // measured: b
  EXPECT_EQ(ops::choose_fastest(large, names, log.answer({2, 9, 1})), 2);  // measured: c
  // Choices this process made are no neighbours: 4000 is timed in full.
  log.timed.clear();
  EXPECT_EQ(ops::choose_fastest(ops::sized_key(family, 4000, "x"), names, log.answer({2, 9, 1})), 2);
  EXPECT_EQ(log.timed, (std::vector<int>{0, 1, 2}));

  ops::set_tune_cache_path(file.string());  // a later process
  log.timed.clear();
  log.efforts.clear();
  const ops::TuningStats before = ops::tuning_stats();
  // 1400 is nearer 1000 (1.4x) than 4000 (2.9x): b, run once briefly although c would be faster.
  const std::string between = ops::sized_key(family, 1400, "2x40x35");
  EXPECT_EQ(ops::choose_fastest(between, names, log.answer({3, 5, 1})), 1);
  EXPECT_EQ(log.timed, (std::vector<int>{1}));
  EXPECT_EQ(log.efforts, (std::vector<ops::TimingEffort>{ops::TimingEffort::kBrief}));
  const ops::TuningStats tuned = ops::tuning_since(before);
  EXPECT_EQ(tuned.keys_tuned, 1);
  EXPECT_EQ(tuned.keys_borrowed, 1);
  EXPECT_NE(read_all(file).find(between + "\tb\t5\tnear\n"), std::string::npos) << read_all(file);

  // Too far from every neighbour (more than kNearWorkRatio), another family, or a key that is not
  // sized: the quick candidates are timed.
  log.timed.clear();
  EXPECT_EQ(ops::choose_fastest(ops::sized_key(family, 25000, "far"), names, log.answer({3, 2, 4})), 1);
  EXPECT_EQ(
      ops::choose_fastest(ops::sized_key(family + " bias", 1000, "2x32x32"), names, log.answer({1, 2, 3})),
      0);
  EXPECT_EQ(ops::choose_fastest(family + " 1000", names, log.answer({2, 1, 3})), 1);
  EXPECT_EQ(log.timed.size(), 9u);

  // A later process takes the neighbour's choice as it is, and never takes it as a neighbour's source:
  // 1500 gets 1000's b (1.5x), not 1400's (1.07x); an exhaustive process retunes it and never borrows.
  ops::set_tune_cache_path(file.string());
  log.timed.clear();
  EXPECT_EQ(ops::choose_fastest(between, names, log.answer({3, 5, 1})), 1);
  EXPECT_TRUE(log.timed.empty());
  EXPECT_EQ(ops::choose_fastest(ops::sized_key(family, 1500, "y"), {"c", "b"}, log.answer({1, 5})), 1);
  EXPECT_NE(read_all(file).find(ops::sized_key(family, 1500, "y") + "\tb\t5\tnear\n"), std::string::npos);
  ops::set_tune_policy(ops::TunePolicy::kExhaustive);
  log.timed.clear();
  EXPECT_EQ(ops::choose_fastest(between, names, log.answer({3, 5, 1})), 2);
  EXPECT_EQ(log.timed, (std::vector<int>{0, 1, 2}));
  log.timed.clear();
  EXPECT_EQ(ops::choose_fastest(ops::sized_key(family, 1100, "z"), names, log.answer({3, 5, 1})), 2);
  EXPECT_EQ(log.timed, (std::vector<int>{0, 1, 2}));
}

// The neighbour's winner is not taken when this problem is not offered it, or when it fails here: the
// quick candidates are timed instead (the failed one not again).
TEST_F(Autotuner, ANeighboursChoiceThatIsMissingOrFailsIsTunedInstead) {
  const auto file = dir_.path() / "tuning.tsv";
  ops::set_tune_cache_path(file.string());
  TimingLog log;
  EXPECT_EQ(ops::choose_fastest(ops::sized_key("conv", 100, "a"), {"split", "tile"}, log.answer({1, 2})), 0);
  ops::set_tune_cache_path(file.string());
  log.timed.clear();
  EXPECT_EQ(ops::choose_fastest(ops::sized_key("conv", 150, "b"), {"tile", "big"}, log.answer({2, 1})),
            1);  // no split
  EXPECT_EQ(log.timed, (std::vector<int>{0, 1}));
  log.timed.clear();
  EXPECT_EQ(
      ops::choose_fastest(ops::sized_key("conv", 120, "c"), {"tile", "split", "big"}, log.answer({2, -1, 3})),
      0);
  EXPECT_EQ(log.timed, (std::vector<int>{1, 0, 2}));  // split once (failed), then the others
}

// A neighbour more than kNearDirectRatio away: its choice of our own is raced against the libraries' own
// picks (the faster wins, tagged near); its choice of a library's pick is taken alone.
TEST_F(Autotuner, AFarNeighboursChoiceOfOursIsRacedAgainstTheLibrariesPicks) {
  const auto file = dir_.path() / "tuning.tsv";
  ops::set_tune_cache_path(file.string());
  const std::vector<std::string> names{"ours", "ours-split", "library", "library-rank-1"};
  const std::vector<bool> quick{true, true, true, true}, picks{false, false, true, false};
  TimingLog log;
  EXPECT_EQ(
      ops::choose_fastest(ops::sized_key("conv", 100, "a"), names, log.answer({1, 2, 3, 4}), quick, picks),
      0);
  EXPECT_EQ(
      ops::choose_fastest(ops::sized_key("other", 100, "a"), names, log.answer({5, 5, 1, 4}), quick, picks),
      2);
  ops::set_tune_cache_path(file.string());
  log.timed.clear();
  // 2x away: taken alone.
  EXPECT_EQ(
      ops::choose_fastest(ops::sized_key("conv", 200, "b"), names, log.answer({5, 2, 3, 4}), quick, picks),
      0);
  EXPECT_EQ(log.timed, (std::vector<int>{0}));
  log.timed.clear();
  // 4x away: raced against the library's pick only, which wins here.
  EXPECT_EQ(
      ops::choose_fastest(ops::sized_key("conv", 400, "c"), names, log.answer({5, 1, 3, 4}), quick, picks),
      2);
  EXPECT_EQ(log.timed, (std::vector<int>{0, 2}));
  log.timed.clear();
  // A neighbour whose winner is the library's pick: taken alone, even 4x away.
  EXPECT_EQ(
      ops::choose_fastest(ops::sized_key("other", 400, "b"), names, log.answer({1, 1, 3, 4}), quick, picks),
      2);
  EXPECT_EQ(log.timed, (std::vector<int>{2}));
}

// Library notes of sized keys: a problem without its own note gets, under the quick policy, the note of
// its nearest neighbour that the cache file held (marked near), which a caller may keep as the
// problem's own ("\tnote\tnear"); the exhaustive policy takes no near note, so that the library is asked
// about the problem itself.
TEST_F(Autotuner, ANoteOfASizedKeyComesFromTheNearestNeighbourUnderTheQuickPolicyOnly) {
  const auto file = dir_.path() / "tuning.tsv";
  ops::set_tune_cache_path(file.string());
  const std::string family = "lib 9 on X: conv 320";
  ops::remember_library_note(ops::sized_key(family, 1000, "a"), "E1");
  ops::remember_library_note(ops::sized_key(family, 9000, "b"), "E9");
  const std::string key = ops::sized_key(family, 2000, "c");
  EXPECT_EQ(ops::library_note(key).value, "");  // this process's own notes are no neighbours
  ops::set_tune_cache_path(file.string());
  const ops::LibraryNote near = ops::library_note(key);
  EXPECT_EQ(near.value, "E1");
  EXPECT_TRUE(near.near);
  EXPECT_EQ(ops::library_note(ops::sized_key(family, 5000, "d")).value,
            "E9");                                                             // 1.8x from 9000, 5x from 1000
  EXPECT_EQ(ops::library_note(ops::sized_key(family, 50000, "e")).value, "");  // 5.6x from the nearest
  ops::remember_library_note(key, near.value, true);
  EXPECT_NE(read_all(file).find(key + "\tE1\tnote\tnear\n"), std::string::npos) << read_all(file);

  ops::set_tune_cache_path(file.string());  // read back: kept as near
  EXPECT_EQ(ops::library_note(key).value, "E1");
  EXPECT_TRUE(ops::library_note(key).near);
  EXPECT_EQ(ops::library_note(ops::sized_key(family, 2100, "f")).value,
            "E1");  // from 1000's, not from 2000's
  ops::set_tune_policy(ops::TunePolicy::kExhaustive);
  EXPECT_EQ(ops::library_note(key).value, "");
  ops::remember_library_note(key, "E5");  // the library's own answer replaces the neighbour's
  EXPECT_EQ(ops::library_note(key).value, "E5");
  EXPECT_FALSE(ops::library_note(key).near);
}

// What may change a choice already made moves the generation that ops remembering choices watch.
TEST_F(Autotuner, TheGenerationMovesWithWhatMayChangeAChoice) {
  uint64_t last = ops::tuning_generation();
  const auto moved = [&] {
    const uint64_t now = ops::tuning_generation();
    const bool changed = now != last;
    last = now;
    return changed;
  };
  ops::set_tune_cache_path("");
  EXPECT_TRUE(moved());
  ops::choose_fastest("generation k", {"a", "b"}, [](int i) { return 1.0 + i; });
  EXPECT_FALSE(moved());  // a new choice changes no earlier one
  ops::forget_choice("generation k");
  EXPECT_TRUE(moved());
  ops::set_tune_policy(ops::TunePolicy::kQuick);
  EXPECT_TRUE(moved());
  const ops::KernelChoice kernels = ops::kernel_choice();
  ops::set_kernel_choice(kernels);
  EXPECT_TRUE(moved());
}

TEST_F(Autotuner, CountsTheKeysItTunedAndTheTimeItTook) {
  ops::set_tune_cache_path("");
  const ops::TuningStats before = ops::tuning_stats();
  ops::choose_fastest("stats a", {"x", "y"}, [](int i) { return 1.0 + i; });
  ops::choose_fastest("stats a", {"x", "y"}, [](int i) { return 1.0 + i; });  // remembered: not counted
  ops::choose_fastest("stats b", {"x", "y"}, [](int i) { return 1.0 + i; });
  const ops::TuningStats after = ops::tuning_stats();
  EXPECT_EQ(after.keys_tuned - before.keys_tuned, 2);
  EXPECT_GE(after.milliseconds, before.milliseconds);
}

// Processes tuning at once append to one file: every line must come out whole.
TEST_F(Autotuner, ProcessesAppendingAtOnceLeaveEveryLineWhole) {
  const auto file = dir_.path() / "shared.tsv";
  constexpr int kProcesses = 4, kKeys = 200;
  std::vector<pid_t> children;
  for (int p = 0; p < kProcesses; ++p) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ops::set_tune_cache_path(file.string());
      const std::string long_part(300, char('a' + p));  // long lines tear first, if anything tears
      for (int k = 0; k < kKeys; ++k)
        ops::choose_fastest(str_cat("process ", p, " key ", k, " ", long_part), {"x", "y"}, [](int i) { return 1.0 + i; });
      std::_Exit(0);
    }
    children.push_back(pid);
  }
  for (const pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  std::ifstream in(file);
  std::string line;
  int lines = 0;
  while (std::getline(in, line)) {
    ++lines;
    int p = -1, k = -1;
    ASSERT_EQ(std::sscanf(line.c_str(), "process %d key %d ", &p, &k), 2) << line.substr(0, 40);
    ASSERT_EQ(line, str_cat("process ", p, " key ", k, " ", std::string(300, char('a' + p)), "\tx\t1\tquick"));
  }
  EXPECT_EQ(lines, kProcesses * kKeys);
  // And a later process reads them all back as choices.
  ops::set_tune_cache_path(file.string());
  EXPECT_EQ(ops::choose_fastest(str_cat("process 2 key 7 ", std::string(300, 'c')), {"y", "x"},
                                [](int) -> double {
                                  ADD_FAILURE() << "timed";
                                  return 1;
                                }),
            1);
}

TEST(TunePolicy, ParsesQuickAndExhaustiveAndNamesTheSourceOfAnythingElse) {
  EXPECT_EQ(ops::parse_tune_policy("quick", "--tune"), ops::TunePolicy::kQuick);
  EXPECT_EQ(ops::parse_tune_policy("exhaustive", "--tune"), ops::TunePolicy::kExhaustive);
  try {
    ops::parse_tune_policy("full", "HD_TUNE");
    ADD_FAILURE() << "accepted 'full'";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
    EXPECT_NE(std::string(e.what()).find("HD_TUNE must be 'quick'"), std::string::npos) << e.what();
  }
  EXPECT_STREQ(ops::tune_policy_name(ops::TunePolicy::kExhaustive), "exhaustive");
}

// --kernels / $HD_KERNELS: three words, anything else refused with where it came from.
TEST(KernelChoice, ParsesOwnAndAllAndNamesTheSourceOfAnythingElse) {
  EXPECT_EQ(ops::parse_kernel_choice("own", "--kernels"), ops::KernelChoice::kOwn);
  EXPECT_EQ(ops::parse_kernel_choice("all", "--kernels"), ops::KernelChoice::kAll);
  EXPECT_EQ(ops::parse_kernel_choice("fragments", "--kernels"), ops::KernelChoice::kFragments);
  for (const ops::KernelChoice c :
       {ops::KernelChoice::kOwn, ops::KernelChoice::kAll, ops::KernelChoice::kFragments})
    EXPECT_EQ(ops::parse_kernel_choice(ops::kernel_choice_name(c), "--kernels"), c);
  for (const char* bad : {"", "Own", "vendor", "own ", "fragment"}) {
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

// Inside a NoTuningScope (the extension's CUDA-graph captures) a new key is an error that says why and
// times nothing; a key chosen before is answered as usual; the scope ends with its lifetime.
TEST_F(Autotuner, NoTuningScopeRefusesNewKeysAndAnswersKnownOnes) {
  ops::set_tune_cache_path("");
  int timed = 0;
  const auto times = [&](int i) {
    ++timed;
    return double(i + 1);
  };
  EXPECT_EQ(ops::choose_fastest("gemm known", {"a", "b"}, times), 0);
  timed = 0;
  {
    const ops::NoTuningScope scope("inside a test's capture");
    EXPECT_EQ(ops::choose_fastest("gemm known", {"a", "b"}, times), 0);
    try {
      ops::choose_fastest("gemm new", {"a", "b"}, times);
      ADD_FAILURE() << "a new key was tuned inside the scope";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
      EXPECT_NE(std::string(e.what()).find("cannot be tuned inside a test's capture"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(timed, 0);
  EXPECT_EQ(ops::choose_fastest("gemm new", {"a", "b"}, times), 0);
  EXPECT_EQ(timed, 2);
}

}  // namespace
}  // namespace hd
