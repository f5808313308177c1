#include "base/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "base/sys.h"

namespace colibri {

namespace {

constexpr double kTerminalInterval = 0.1;  // redraws per second a person can follow
constexpr double kLinesInterval = 2.0;     // keeps a log of a fast run to a few lines

struct ByteUnit {
  double scale;
  const char* name;
};

// The largest binary unit that keeps v at 1 or more.
ByteUnit byte_unit(double v) {
  static const char* const kNames[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double scale = 1;
  int u = 0;
  while (v >= 1024 * scale && u < 4) {
    scale *= 1024;
    ++u;
  }
  return {scale, kNames[u]};
}

// Three significant digits or so: 1.23, 12.3, 123.
int decimals(double x) { return x < 10 ? 2 : x < 100 ? 1 : 0; }

}  // namespace

ProgressStyle progress_style(FILE* f, bool quiet) {
  if (quiet) return ProgressStyle::kQuiet;
  return isatty(fileno(f)) ? ProgressStyle::kTerminal : ProgressStyle::kLines;
}

std::string format_amount(double v, ProgressUnit unit, const std::string& noun) {
  if (unit == ProgressUnit::kCount) {
    // Thousands separated: counts of tokens read better as 1,234,567.
    std::string digits = strprintf("%.0f", std::max(0.0, v));
    for (int i = static_cast<int>(digits.size()) - 3; i > 0; i -= 3) digits.insert(i, ",");
    return noun.empty() ? digits : digits + " " + noun;
  }
  const ByteUnit b = byte_unit(v);
  const double x = v / b.scale;
  return b.scale == 1 ? strprintf("%.0f B", x) : strprintf("%.*f %s", decimals(x), x, b.name);
}

std::string format_duration(double s) {
  const long t = std::lround(std::max(0.0, s));
  if (t >= 3600) return strprintf("%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
  return strprintf("%ld:%02ld", t / 60, t % 60);
}

std::string format_progress(const std::string& what, uint64_t done, uint64_t total,
                            double elapsed_s, ProgressUnit unit, const std::string& noun) {
  std::string out = what;
  const double d = static_cast<double>(done);
  if (total > 0) {
    const double frac = std::min(1.0, d / static_cast<double>(total));
    out += strprintf("  %3d%%  ", static_cast<int>(frac * 100));
    // "1.23 of 2.90 GiB": the unit once, the total's.
    if (unit == ProgressUnit::kBytes) {
      const ByteUnit b = byte_unit(static_cast<double>(total));
      const double x = d / b.scale;
      out += strprintf("%.*f of %s", b.scale == 1 ? 0 : decimals(x), x,
                       format_amount(static_cast<double>(total), unit).c_str());
    } else {
      out += format_amount(d, unit) + " of " + format_amount(static_cast<double>(total), unit, noun);
    }
  } else {
    out += "  " + format_amount(d, unit, noun);
  }
  if (elapsed_s > 0 && done > 0) {
    const double rate = d / elapsed_s;
    out += "  " + format_amount(rate, unit, unit == ProgressUnit::kCount ? noun : std::string()) + "/s";
    if (total > done) out += "  " + format_duration(static_cast<double>(total - done) / rate) + " left";
  }
  return out;
}

Progress::Progress(std::string what, uint64_t total, ProgressStyle style, FILE* out,
                   ProgressUnit unit, std::string noun)
    : what_(std::move(what)), noun_(std::move(noun)), total_(total), style_(style), out_(out),
      unit_(unit), start_s_(now_seconds()) {}

Progress::~Progress() { finish(); }

void Progress::update(uint64_t done) {
  if (style_ == ProgressStyle::kQuiet) return;
  update_at(done, now_seconds() - start_s_);
}

void Progress::update_at(uint64_t done, double now_s) {
  if (style_ == ProgressStyle::kQuiet) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (finished_) return;
  // Several threads may report out of order; the count only grows.
  done_ = std::max(done_, done);
  if (now_s < kProgressQuietStart) return;
  if (style_ == ProgressStyle::kTerminal) {
    if (last_draw_s_ >= 0 && now_s - last_draw_s_ < kTerminalInterval) return;
  } else {
    const int tenth = total_ ? static_cast<int>(10.0 * static_cast<double>(done_) / static_cast<double>(total_)) : 0;
    const bool due = total_ ? tenth > last_tenth_ : last_draw_s_ < 0 || now_s - last_draw_s_ >= 10 * kLinesInterval;
    if (!due || (last_draw_s_ >= 0 && now_s - last_draw_s_ < kLinesInterval)) return;
    last_tenth_ = tenth;
  }
  draw_locked(done_, now_s, false);
}

void Progress::finish() {
  finish_at(now_seconds() - start_s_);
}

void Progress::finish_at(double now_s) {
  std::lock_guard<std::mutex> lock(mu_);
  if (finished_ || style_ == ProgressStyle::kQuiet) {
    finished_ = true;
    return;
  }
  finished_ = true;
  // Quick work leaves no trace; work that showed progress says how it ended.
  if (last_draw_s_ < 0 && now_s < kProgressQuietStart) return;
  draw_locked(done_, now_s, true);
}

void Progress::clear() {
  std::lock_guard<std::mutex> lock(mu_);
  if (style_ == ProgressStyle::kTerminal && drawn_width_ > 0) {
    std::fprintf(out_, "\r%*s\r", static_cast<int>(drawn_width_), "");
    std::fflush(out_);
  }
  drawn_width_ = 0;
  finished_ = true;
}

void Progress::draw_locked(uint64_t done, double now_s, bool final) {
  std::string line = format_progress(what_, done, total_, now_s, unit_, noun_);
  if (final) line += "  in " + format_duration(now_s);
  if (style_ == ProgressStyle::kTerminal) {
    // Spaces over what a longer previous line left behind.
    const size_t width = line.size();
    if (width < drawn_width_) line.append(drawn_width_ - width, ' ');
    std::fprintf(out_, "\r%s%s", line.c_str(), final ? "\n" : "");
    drawn_width_ = final ? 0 : width;
  } else {
    std::fprintf(out_, "%s\n", line.c_str());
  }
  std::fflush(out_);
  last_draw_s_ = now_s;
}

}  // namespace colibri
