#include "server/text_stream.h"

#include <algorithm>

#include "base/utf8.h"

namespace colibri::server {

void TextStream::reset(const std::vector<std::string>* stop) {
  stop_ = stop;
  text_.clear();
  emitted_ = 0;
  stopped_ = false;
}

void TextStream::emit(size_t upto, std::string& out) {
  if (upto <= emitted_) return;
  out += utf8_sanitize(std::string_view(text_).substr(emitted_, upto - emitted_));
  emitted_ = upto;
}

void TextStream::add(std::string_view piece, std::string& out) {
  if (stopped_) return;
  text_.append(piece);
  // A stop string cannot begin before emitted_: text that could still grow
  // into one is never emitted.
  size_t cut = std::string::npos;
  if (stop_)
    for (const std::string& s : *stop_) {
      if (s.empty()) continue;
      size_t at = text_.find(s, emitted_);
      if (at != std::string::npos) cut = std::min(cut, at);
    }
  if (cut != std::string::npos) {
    text_.resize(cut);
    stopped_ = true;
    emit(text_.size(), out);
    return;
  }
  const size_t complete = utf8_complete_prefix(text_);
  size_t ready = complete;
  if (stop_)
    for (const std::string& s : *stop_) {
      if (s.empty()) continue;
      // Hold back the longest tail that is a proper prefix of s.
      for (size_t k = std::min(s.size() - 1, complete - std::min(complete, emitted_)); k > 0; --k)
        if (text_.compare(complete - k, k, s, 0, k) == 0) {
          ready = std::min(ready, complete - k);
          break;
        }
    }
  emit(ready, out);
}

void TextStream::flush(std::string& out) {
  emit(text_.size(), out);
}

}  // namespace colibri::server
