// Tests of the streaming stop-string filter (runtime/session/stop_filter).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "common/error.h"
#include "sampling/sampling.h"
#include "session/stop_filter.h"

namespace vegas {
namespace {

struct Fed {
  std::string emitted;
  bool stopped = false;
};

Fed feed_all(StopFilter &f, const std::vector<std::string> &pieces) {
  Fed out;
  for (const std::string &p : pieces) {
    StopFilter::Result r = f.push(p);
    out.emitted += r.emit;
    out.stopped = r.stopped;
  }
  if (!out.stopped) out.emitted += f.finish();
  return out;
}

// Proves an empty stop list passes every piece straight through, holding nothing.
TEST(StopFilter, EmptyListIsPassThrough) {
  StopFilter f({});
  for (const char *piece : {"Hello", ", ", "wörld", ""}) {
    StopFilter::Result r = f.push(piece);
    EXPECT_EQ(r.emit, piece);
    EXPECT_FALSE(r.stopped);
    EXPECT_EQ(f.held(), 0u);
  }
  EXPECT_EQ(f.finish(), "");
}

// Proves a match inside one piece emits the text before it and drops the rest,
// and that every later piece is dropped too.
TEST(StopFilter, MatchInsideOnePiece) {
  StopFilter f({"END"});
  StopFilter::Result r = f.push("Hello END world");
  EXPECT_EQ(r.emit, "Hello ");
  EXPECT_TRUE(r.stopped);
  r = f.push("more");
  EXPECT_EQ(r.emit, "");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(f.finish(), "");
}

// Proves a stop string spread over several pieces is caught, and that text
// which might start it is held back (not emitted) until it is decided.
TEST(StopFilter, MatchSpanningPieces) {
  StopFilter f({"END"});
  EXPECT_EQ(f.push("Hel").emit, "Hel");
  StopFilter::Result r = f.push("lo E");
  EXPECT_EQ(r.emit, "lo ");
  EXPECT_EQ(f.held(), 1u);
  r = f.push("N");
  EXPECT_EQ(r.emit, "");
  EXPECT_FALSE(r.stopped);
  r = f.push("D more");
  EXPECT_EQ(r.emit, "");
  EXPECT_TRUE(r.stopped);
}

// Proves held text is released when it turns out not to be a stop string, and
// by finish() at the end of the stream.
TEST(StopFilter, HeldTextReleased) {
  StopFilter f({"END"});
  EXPECT_EQ(f.push("abc EN").emit, "abc ");
  EXPECT_EQ(f.push("x").emit, "ENx");
  EXPECT_EQ(f.push(" E").emit, " ");
  EXPECT_EQ(f.finish(), "E");
}

// Proves overlapping candidates: a self-overlapping stop string ("aab" in
// "aaab"), the earliest-ending match winning over an earlier-starting longer
// one, and the longest winning among matches ending on the same byte.
TEST(StopFilter, OverlappingCandidates) {
  {
    StopFilter f({"aab"});
    EXPECT_EQ(feed_all(f, {"a", "a", "a", "b", "c"}).emitted, "a");
  }
  {
    StopFilter f({"abcd", "bc"});
    const Fed r = feed_all(f, {"xabcd"});
    EXPECT_TRUE(r.stopped);
    EXPECT_EQ(r.emitted, "xa");
  }
  {
    StopFilter f({"cd", "bcd"});
    EXPECT_EQ(feed_all(f, {"xab", "cd"}).emitted, "xa");
  }
  {
    StopFilter f({"abac", "ba"});
    EXPECT_EQ(feed_all(f, {"xab", "ac"}).emitted, "xa");  // "ba" ends first, across pieces
  }
}

// Proves multi-byte UTF-8 stop strings work and held text never splits a
// character: the emitted pieces stay valid UTF-8.
TEST(StopFilter, Utf8StopStrings) {
  StopFilter f({"ß!", "。"});
  StopFilter::Result r = f.push("maß");
  EXPECT_EQ(r.emit, "ma");
  EXPECT_EQ(f.held(), 2u);  // both bytes of ß
  r = f.push("geblich。 x");
  EXPECT_EQ(r.emit, "ßgeblich");
  EXPECT_TRUE(r.stopped);
}

// Proves a very long stop string (10K bytes) is handled without quadratic
// blow-up: at most |stop| - 1 bytes are held, and the match is found when it ends.
TEST(StopFilter, VeryLongStopString) {
  const std::string stop = std::string(9999, 'x') + "y";
  StopFilter f({stop});
  std::string emitted;
  for (int i = 0; i < 200; ++i) emitted += f.push(std::string(100, 'x')).emit;
  EXPECT_EQ(f.held(), 9999u);
  EXPECT_EQ(emitted, std::string(20000 - 9999, 'x'));
  const StopFilter::Result r = f.push("yz");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(emitted + r.emit, std::string(20000 - 9999, 'x'));
}

// Proves bad stop strings are rejected with a clear error.
TEST(StopFilter, RejectsBadStopStrings) {
  try {
    StopFilter f({"ok", ""});
    ADD_FAILURE() << "empty stop string accepted";
  } catch (const Error &e) {
    EXPECT_EQ(e.status(), VEGAS_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("stop string 1"), std::string::npos);
  }
  EXPECT_THROW(StopFilter({"\xff\xfe"}), Error);
  EXPECT_THROW(StopFilter({"a\xc3"}), Error);  // truncated 2-byte sequence
}

// ------------------------------------------------------------ property test

// The whole-text reference: the match ending first (longest on a tie) cuts the text.
Fed reference(const std::string &text, const std::vector<std::string> &stops) {
  size_t best_end = std::string::npos, best_len = 0;
  for (const std::string &s : stops) {
    const size_t pos = text.find(s);
    if (pos == std::string::npos) continue;
    const size_t end = pos + s.size();
    if (best_end == std::string::npos || end < best_end || (end == best_end && s.size() > best_len))
      best_end = end, best_len = s.size();
  }
  if (best_end == std::string::npos) return Fed{text, false};
  return Fed{text.substr(0, best_end - best_len), true};
}

// The longest suffix of `text` that is a proper prefix of a stop string: what
// must be held back, and nothing more.
size_t must_hold(const std::string &text, const std::vector<std::string> &stops) {
  size_t hold = 0;
  for (const std::string &s : stops)
    for (size_t len = std::min(s.size() - 1, text.size()); len > hold; --len)
      if (text.compare(text.size() - len, len, s, 0, len) == 0) {
        hold = len;
        break;
      }
  return hold;
}

// Proves, on 3000 random texts, stop lists and cuttings into pieces (over an
// alphabet with a 2-byte character, so many partial and overlapping matches):
// the output equals the whole-text reference whatever the cutting, the emitted
// text is always a prefix of the final output, and exactly the necessary
// suffix is held back after each piece.
TEST(StopFilter, AnyCuttingMatchesWholeTextReference) {
  const std::vector<std::string> alphabet = {"a", "b", "é"};
  Rng rng(31337);
  auto pick = [&](size_t n) { return static_cast<size_t>(rng.next_u64() % n); };
  auto random_string = [&](size_t max_chars, std::vector<std::string> *chars) {
    const size_t n = pick(max_chars + 1);
    std::string s;
    for (size_t i = 0; i < n; ++i) {
      chars->push_back(alphabet[pick(alphabet.size())]);
      s += chars->back();
    }
    return s;
  };
  int stopped_cases = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::vector<std::string> stops;
    const size_t n_stops = pick(4);
    while (stops.size() < n_stops) {
      std::vector<std::string> chars;
      std::string s = random_string(4, &chars);
      if (!s.empty()) stops.push_back(s);
    }
    std::vector<std::string> chars;
    const std::string text = random_string(30, &chars);
    // Cut the characters into pieces of 0..4 characters (pieces are whole UTF-8).
    std::vector<std::string> pieces;
    for (size_t i = 0; i < chars.size();) {
      const size_t take = std::min(chars.size() - i, pick(5));
      std::string piece;
      for (size_t k = 0; k < take; ++k) piece += chars[i + k];
      pieces.push_back(piece);
      i += take;
    }
    const Fed want = reference(text, stops);
    StopFilter f(stops);
    Fed got;
    std::string seen;
    for (const std::string &p : pieces) {
      const StopFilter::Result r = f.push(p);
      seen += p;
      got.emitted += r.emit;
      got.stopped = r.stopped;
      ASSERT_EQ(want.emitted.compare(0, got.emitted.size(), got.emitted), 0)
          << "emitted text is not a prefix of the final output, trial " << trial;
      if (r.stopped) break;
      ASSERT_EQ(f.held(), must_hold(seen, stops)) << "trial " << trial << " after '" << seen << "'";
    }
    if (!got.stopped) got.emitted += f.finish();
    ASSERT_EQ(got.stopped, want.stopped) << "trial " << trial << " text '" << text << "'";
    ASSERT_EQ(got.emitted, want.emitted) << "trial " << trial << " text '" << text << "'";
    stopped_cases += want.stopped;
  }
  // Both outcomes are well represented.
  EXPECT_GT(stopped_cases, 500);
  EXPECT_LT(stopped_cases, 2500);
}

}  // namespace
}  // namespace vegas
