// Progress of long work (writing a multi-GB file, loading weights, replaying
// a long log) on stderr: percent, amount, rate and time left.
//
// On a terminal one line is redrawn in place (\r) at most every 0.1 s; when
// stderr is a file or a pipe, a plain line is written at each further tenth
// of the work, at most every 2 s, so logs stay short; with -q nothing.
// Work that ends within kProgressQuietStart seconds prints nothing at all:
// progress is for waits a person notices.
#pragma once

#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>

namespace colibri {

enum class ProgressStyle { kQuiet, kLines, kTerminal };
// What a ProgressUnit counts: bytes (shown in KiB..GiB, rate per second) or
// things named by `noun` ("tokens").
enum class ProgressUnit { kBytes, kCount };

constexpr double kProgressQuietStart = 0.5;  // seconds before anything is shown

// kTerminal when f is a terminal, else kLines; kQuiet when quiet.
ProgressStyle progress_style(FILE* f, bool quiet);

// "writing a.gguf  42%  1.23 of 2.90 GiB  85.3 MiB/s  0:19 left" (no newline).
// total 0: unknown (no percent, no time left).
std::string format_progress(const std::string& what, uint64_t done, uint64_t total,
                            double elapsed_s, ProgressUnit unit, const std::string& noun = {});
// "1.23 GiB", "512 B", "12,345 tokens".
std::string format_amount(double v, ProgressUnit unit, const std::string& noun = {});
// "0:07", "12:34", "1:02:03".
std::string format_duration(double s);

class Progress {
 public:
  Progress(std::string what, uint64_t total, ProgressStyle style, FILE* out = stderr,
           ProgressUnit unit = ProgressUnit::kBytes, std::string noun = {});
  ~Progress();  // finish(), if not finished

  // Safe from several threads at once; cheap when nothing is due.
  void update(uint64_t done);
  // As update(), with the clock given (seconds since construction): for tests.
  void update_at(uint64_t done, double now_s);
  // The last line, with the total time; after it updates are ignored.
  void finish();
  void finish_at(double now_s);
  // Takes a redrawn line off the terminal without a final line (output
  // that follows is not progress: the first generated text, say).
  void clear();

 private:
  void draw_locked(uint64_t done, double now_s, bool final);

  std::string what_, noun_;
  uint64_t total_;
  ProgressStyle style_;
  FILE* out_;
  ProgressUnit unit_;
  double start_s_;
  std::mutex mu_;
  uint64_t done_ = 0;
  double last_draw_s_ = -1;  // -1: nothing drawn yet
  int last_tenth_ = 0;       // kLines: the last tenth of the work reported
  size_t drawn_width_ = 0;   // kTerminal: characters on the current line
  bool finished_ = false;
};

}  // namespace colibri
