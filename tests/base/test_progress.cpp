// base/progress.h: the text of a progress line, and what each style writes
// (a redrawn terminal line, occasional plain lines, nothing) on a fake clock.
#include "base/progress.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <string>

namespace colibri {
namespace {

// Everything written to f so far.
std::string contents(FILE* f) {
  std::fflush(f);
  std::string s;
  std::rewind(f);
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) s.append(buf, n);
  return s;
}

size_t count(const std::string& s, char c) {
  size_t n = 0;
  for (char x : s) n += x == c;
  return n;
}

constexpr uint64_t kGiB = uint64_t{1} << 30;

TEST(ProgressFormat, Amounts) {
  EXPECT_EQ(format_amount(512, ProgressUnit::kBytes), "512 B");
  EXPECT_EQ(format_amount(1536, ProgressUnit::kBytes), "1.50 KiB");
  EXPECT_EQ(format_amount(85.3 * 1048576, ProgressUnit::kBytes), "85.3 MiB");
  EXPECT_EQ(format_amount(300.0 * kGiB, ProgressUnit::kBytes), "300 GiB");
  EXPECT_EQ(format_amount(1234567, ProgressUnit::kCount, "tokens"), "1,234,567 tokens");
  EXPECT_EQ(format_amount(999, ProgressUnit::kCount), "999");
  EXPECT_EQ(format_duration(7), "0:07");
  EXPECT_EQ(format_duration(754), "12:34");
  EXPECT_EQ(format_duration(3723), "1:02:03");
}

TEST(ProgressFormat, Line) {
  // 1.25 of 2.5 GiB in 10 s: 128 MiB/s, 10 s left.
  EXPECT_EQ(format_progress("writing a.gguf", kGiB + kGiB / 4, 2 * kGiB + kGiB / 2, 10, ProgressUnit::kBytes),
            "writing a.gguf   50%  1.25 of 2.50 GiB  128 MiB/s  0:10 left");
  EXPECT_EQ(format_progress("replaying", 250, 1000, 5, ProgressUnit::kCount, "tokens"),
            "replaying   25%  250 of 1,000 tokens  50 tokens/s  0:15 left");
  // Done: no time left; unknown total: no percent.
  EXPECT_EQ(format_progress("x", 100, 100, 2, ProgressUnit::kCount), "x  100%  100 of 100  50/s");
  EXPECT_EQ(format_progress("x", 2048, 0, 2, ProgressUnit::kBytes), "x  2.00 KiB  1.00 KiB/s");
  EXPECT_EQ(format_progress("x", 0, 10, 0, ProgressUnit::kBytes), "x    0%  0 of 10 B");
}

TEST(Progress, StyleFollowsTheStream) {
  FILE* file = std::tmpfile();
  ASSERT_NE(file, nullptr);
  EXPECT_EQ(progress_style(file, false), ProgressStyle::kLines);
  EXPECT_EQ(progress_style(file, true), ProgressStyle::kQuiet);
  std::fclose(file);
  // A pseudo-terminal stands in for a terminal.
  const int master = posix_openpt(O_RDWR | O_NOCTTY);
  if (master < 0 || grantpt(master) != 0 || unlockpt(master) != 0) GTEST_SKIP() << "no pseudo-terminal here";
  const int slave = open(ptsname(master), O_RDWR | O_NOCTTY);
  ASSERT_GE(slave, 0);
  FILE* tty = fdopen(slave, "w");
  EXPECT_EQ(progress_style(tty, false), ProgressStyle::kTerminal);
  EXPECT_EQ(progress_style(tty, true), ProgressStyle::kQuiet);
  std::fclose(tty);
  close(master);
}

TEST(Progress, TerminalRedrawsOneLine) {
  FILE* f = std::tmpfile();
  {
    Progress p("load", 1000, ProgressStyle::kTerminal, f, ProgressUnit::kCount);
    p.update_at(10, 0.1);   // too early: nothing yet
    EXPECT_EQ(contents(f), "");
    p.update_at(100, 1.0);  // drawn
    p.update_at(150, 1.05); // within 0.1 s of the last: skipped
    p.update_at(500, 2.0);  // drawn
    p.finish_at(4.0);
    p.update_at(900, 5.0);  // after finish: ignored
  }
  const std::string s = contents(f);
  std::fclose(f);
  EXPECT_EQ(count(s, '\r'), 3u) << s;
  EXPECT_EQ(count(s, '\n'), 1u) << s;  // the final line only
  EXPECT_NE(s.find("\rload   10%  100 of 1,000"), std::string::npos) << s;
  EXPECT_EQ(s.find("150 of"), std::string::npos) << s;
  EXPECT_NE(s.find("\rload   50%  500 of 1,000  250/s  0:02 left"), std::string::npos) << s;
  EXPECT_NE(s.find("in 0:04\n"), std::string::npos) << s;
  EXPECT_EQ(s.find("900"), std::string::npos) << s;
}

TEST(Progress, TerminalPadsOverALongerLine) {
  FILE* f = std::tmpfile();
  Progress p("x", 0, ProgressStyle::kTerminal, f, ProgressUnit::kBytes);
  p.update_at(1000000, 1.0);  // "x  977 KiB  977 KiB/s"
  p.update_at(1100000, 2.0);  // "x  1.05 MiB  537 KiB/s": the same width or padded
  p.clear();
  const std::string s = contents(f);
  std::fclose(f);
  const size_t first = s.find('\r', 1), second = s.find('\r', first + 1);
  ASSERT_NE(second, std::string::npos) << s;
  EXPECT_GE(second - first, first) << "a redraw must cover the previous line: " << s;
  EXPECT_EQ(s.back(), '\r');  // clear() leaves the cursor at the start of a blank line
  EXPECT_EQ(count(s, '\n'), 0u);
}

TEST(Progress, LinesAtTenthsAndNotTooOften) {
  FILE* f = std::tmpfile();
  {
    Progress p("replay", 100, ProgressStyle::kLines, f, ProgressUnit::kCount);
    for (int i = 1; i <= 100; ++i) p.update_at(i, i * 0.1);  // 10 s in all
    p.finish_at(10.0);
  }
  const std::string s = contents(f);
  std::fclose(f);
  EXPECT_EQ(s.find('\r'), std::string::npos) << s;
  // A line at each new tenth, at most every 2 s: 10%..100% over 10 s gives
  // about one line per 2 s, then the final one.
  const size_t lines = count(s, '\n');
  EXPECT_GE(lines, 4u) << s;
  EXPECT_LE(lines, 7u) << s;
  EXPECT_NE(s.find("replay  100%  100 of 100  10/s  in 0:10\n"), std::string::npos) << s;
}

TEST(Progress, QuietAndQuickWritesNothing) {
  FILE* f = std::tmpfile();
  {
    Progress quiet("x", 10, ProgressStyle::kQuiet, f);
    quiet.update_at(5, 3.0);
    quiet.finish_at(6.0);
    Progress quick("y", 10, ProgressStyle::kTerminal, f);
    quick.update_at(10, 0.2);
    quick.finish_at(0.3);
    Progress quick_lines("z", 10, ProgressStyle::kLines, f);
    quick_lines.update_at(10, 0.2);
    quick_lines.finish_at(0.3);
  }
  EXPECT_EQ(contents(f), "");
  std::fclose(f);
}

TEST(Progress, FinishReportsWhereWorkStopped) {
  FILE* f = std::tmpfile();
  Progress p("copy", 1000, ProgressStyle::kLines, f, ProgressUnit::kCount);
  p.update_at(300, 1.0);
  p.finish_at(3.0);
  const std::string s = contents(f);
  std::fclose(f);
  EXPECT_NE(s.find("copy   30%  300 of 1,000  100/s  0:07 left  in 0:03\n"), std::string::npos) << s;
}

}  // namespace
}  // namespace colibri
