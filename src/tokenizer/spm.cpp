#include "tokenizer/spm.h"

#include <algorithm>

#include "tokenizer/utf8.h"

namespace colibri {

namespace {

// Max-heap order on score, then the leftmost pair first.
bool lower_priority(const auto& a, const auto& b) {
  return a.score < b.score || (a.score == b.score && a.left > b.left);
}

}  // namespace

void SpmMerger::try_add(std::string_view text, int32_t left, int32_t right) {
  if (left < 0 || right < 0) return;
  const Symbol& l = symbols_[left];
  const Symbol& r = symbols_[right];
  // Symbols tile the text, so a pair is one contiguous span.
  const int32_t id = vocab_.find(text.substr(l.offset, l.n + r.n));
  if (id < 0) return;
  heap_.push_back({left, right, vocab_.score[id], l.n + r.n});
  std::push_heap(heap_.begin(), heap_.end(), lower_priority<Bigram, Bigram>);
}

void SpmMerger::encode(std::string_view text, std::vector<int32_t>& out) {
  if (text.empty()) return;
  symbols_.clear();
  heap_.clear();
  for (uint32_t off = 0; off < text.size();) {
    const uint32_t len = static_cast<uint32_t>(
        std::min<size_t>(utf8_lead_len(static_cast<uint8_t>(text[off])), text.size() - off));
    const int32_t i = static_cast<int32_t>(symbols_.size());
    symbols_.push_back({i - 1, off + len == text.size() ? -1 : i + 1, off, len});
    off += len;
  }
  for (int32_t i = 1; i < static_cast<int32_t>(symbols_.size()); ++i) try_add(text, i - 1, i);

  while (!heap_.empty()) {
    std::pop_heap(heap_.begin(), heap_.end(), lower_priority<Bigram, Bigram>);
    const Bigram b = heap_.back();
    heap_.pop_back();
    Symbol& l = symbols_[b.left];
    Symbol& r = symbols_[b.right];
    if (l.n == 0 || r.n == 0 || l.n + r.n != b.size) continue;
    l.n += r.n;
    r.n = 0;
    l.next = r.next;
    if (r.next >= 0) symbols_[r.next].prev = b.left;
    try_add(text, l.prev, b.left);
    try_add(text, b.left, l.next);
  }

  // Every merged piece is a token by construction; single characters may not
  // be, and go out as bytes.
  for (int32_t i = 0; i != -1; i = symbols_[i].next) {
    const std::string_view piece = text.substr(symbols_[i].offset, symbols_[i].n);
    const int32_t id = vocab_.find(piece);
    if (id >= 0) {
      out.push_back(id);
      continue;
    }
    for (char c : piece) {
      const int32_t byte_id = vocab_.byte_token[static_cast<uint8_t>(c)];
      if (byte_id >= 0) out.push_back(byte_id);
    }
  }
}

}  // namespace colibri
