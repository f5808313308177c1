#include "tokenizer/bpe.h"

#include <algorithm>

#include "tokenizer/utf8.h"

namespace colibri {

namespace {

// Min-heap order on (rank, left): std::push_heap keeps the "largest" first.
bool later(const auto& a, const auto& b) {
  return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
}

}  // namespace

void BpeMerger::try_add(std::string_view word, int32_t left, int32_t right) {
  if (left < 0 || right < 0) return;
  const Symbol& l = symbols_[left];
  const Symbol& r = symbols_[right];
  key_.assign(word.substr(l.offset, l.n));
  key_ += ' ';
  key_.append(word.substr(r.offset, r.n));
  const auto it = vocab_.merge_rank.find(key_);
  if (it == vocab_.merge_rank.end()) return;
  heap_.push_back({left, right, it->second, l.n + r.n});
  std::push_heap(heap_.begin(), heap_.end(), later<Bigram, Bigram>);
}

void BpeMerger::encode_word(std::string_view word, std::vector<int32_t>& out) {
  if (word.empty()) return;
  if (vocab_.ignore_merges) {
    const int32_t id = vocab_.find(word);
    if (id >= 0) {
      out.push_back(id);
      return;
    }
  }

  symbols_.clear();
  heap_.clear();
  for (uint32_t off = 0; off < word.size();) {
    const uint32_t len = static_cast<uint32_t>(
        std::min<size_t>(utf8_lead_len(static_cast<uint8_t>(word[off])), word.size() - off));
    const int32_t i = static_cast<int32_t>(symbols_.size());
    symbols_.push_back({i - 1, off + len == word.size() ? -1 : i + 1, off, len});
    off += len;
  }
  for (int32_t i = 1; i < static_cast<int32_t>(symbols_.size()); ++i) try_add(word, i - 1, i);

  while (!heap_.empty()) {
    std::pop_heap(heap_.begin(), heap_.end(), later<Bigram, Bigram>);
    const Bigram b = heap_.back();
    heap_.pop_back();
    Symbol& l = symbols_[b.left];
    Symbol& r = symbols_[b.right];
    // Stale: one side was merged away or has grown since the pair was queued.
    if (l.n == 0 || r.n == 0 || l.n + r.n != b.size) continue;
    l.n += r.n;
    r.n = 0;
    l.next = r.next;
    if (r.next >= 0) symbols_[r.next].prev = b.left;
    try_add(word, l.prev, b.left);
    try_add(word, b.left, l.next);
  }

  for (int32_t i = 0; i != -1; i = symbols_[i].next) {
    const std::string_view piece = word.substr(symbols_[i].offset, symbols_[i].n);
    const int32_t id = vocab_.find(piece);
    if (id >= 0) {
      out.push_back(id);
      continue;
    }
    for (char c : piece) {
      const int32_t byte_id = vocab_.find(std::string_view(&c, 1));
      if (byte_id >= 0) out.push_back(byte_id);
    }
  }
}

}  // namespace colibri
