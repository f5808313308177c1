// Progress of the dense weights' background load (moe/dense_arena.h) on
// stderr, for commands that start on a model at once: a thread polls the
// store until the load is done or stop() is called (before output that is
// not progress, such as the first generated text).
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include "base/progress.h"
#include "moe/expert_store.h"

namespace colibri::cli {

class LoadProgress {
 public:
  LoadProgress(const ExpertStore& store, ProgressStyle style);
  ~LoadProgress() { stop(); }
  // Ends the display: a finished load keeps its last line, an unfinished
  // one is taken off the terminal. Idempotent.
  void stop();

 private:
  void poll(const ExpertStore& store);

  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::unique_ptr<Progress> progress_;
  std::thread thread_;
};

}  // namespace colibri::cli
