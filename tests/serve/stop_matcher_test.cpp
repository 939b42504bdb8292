// Stop sequences across piece boundaries: nothing after a stop is shown, nothing before it is lost.
#include "serve/stop_matcher.h"

#include <gtest/gtest.h>

namespace huddle::serve {
namespace {

// Feeds `pieces` one by one; returns everything shown, finish() included unless stopped.
std::string run(const std::vector<std::string>& stops, const std::vector<std::string>& pieces,
                bool* stopped = nullptr) {
  StopMatcher m(stops);
  std::string out;
  for (const std::string& p : pieces) out += m.push(p);
  if (!m.stopped()) out += m.finish();
  if (stopped) *stopped = m.stopped();
  return out;
}

TEST(StopMatcher, CutsAtAStopSplitAcrossPieces) {
  bool stopped = false;
  EXPECT_EQ(run({"END"}, {"hello E", "N", "D and more"}, &stopped), "hello ");
  EXPECT_TRUE(stopped);
  EXPECT_EQ(run({"b", "abc"}, {"xa", "bc"}, &stopped), "x");  // the earliest match wins
  EXPECT_TRUE(stopped);
}

TEST(StopMatcher, HoldsBackOnlyAPossibleStart) {
  StopMatcher m({"END"});
  EXPECT_EQ(m.push("abE"), "ab");
  EXPECT_EQ(m.push("x"), "Ex");  // "Ex" cannot start "END"
  EXPECT_EQ(m.push("EN"), "");
  EXPECT_EQ(m.finish(), "EN");  // never completed: shown at the end
  EXPECT_FALSE(m.stopped());
}

TEST(StopMatcher, NoStopsPassesEverythingThrough) {
  bool stopped = true;
  EXPECT_EQ(run({}, {"a", "b", ""}, &stopped), "ab");
  EXPECT_FALSE(stopped);
  EXPECT_EQ(run({"\xC3\xA9!"}, {"caf\xC3\xA9", "!x"}, &stopped), "caf");
  EXPECT_TRUE(stopped);
}

}  // namespace
}  // namespace huddle::serve
