#include "cli/load_progress.h"

#include <chrono>

namespace colibri::cli {

namespace {
constexpr std::chrono::milliseconds kPoll{100};
}

LoadProgress::LoadProgress(const ExpertStore& store, ProgressStyle style) {
  uint64_t done = 0, total = 0;
  if (style == ProgressStyle::kQuiet || !store.dense_progress(&done, &total) || done >= total) return;
  progress_ = std::make_unique<Progress>("loading dense weights", total, style);
  thread_ = std::thread([this, &store] { poll(store); });
}

void LoadProgress::poll(const ExpertStore& store) {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    uint64_t done = 0, total = 0;
    store.dense_progress(&done, &total);
    progress_->update(done);
    if (done >= total) {
      progress_->finish();
      return;
    }
    if (cv_.wait_for(lock, kPoll, [this] { return stopping_; })) {
      progress_->clear();
      return;
    }
  }
}

void LoadProgress::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

}  // namespace colibri::cli
