#include "tokenizer/bpe.h"

#include <algorithm>

#include "base/error.h"
#include "tokenizer/byte_level.h"

namespace colibri {

namespace {

uint64_t pair_key(int32_t l, int32_t r) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(l)) << 32) | static_cast<uint32_t>(r);
}

uint64_t hash(uint64_t key) { return (key * 0x9E3779B97F4A7C15ull) ^ (key >> 29); }

// Min-heap order on (rank, left): std::push_heap keeps the "largest" first.
bool later(const BpeModel::Scratch::Bigram& a, const BpeModel::Scratch::Bigram& b) {
  return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
}

}  // namespace

BpeModel::BpeModel(const Vocab& vocab) : vocab_(vocab) {
  // Texts merges mention that are not tokens get symbol ids after the tokens.
  StringToId extra;
  int32_t next_sym = vocab.n_vocab();
  auto sym_of = [&](std::string_view text) {
    const int32_t id = vocab.find(text);
    if (id >= 0) return id;
    auto [it, inserted] = extra.try_emplace(std::string(text), next_sym);
    if (inserted) ++next_sym;
    return it->second;
  };

  size_t cap = 16;
  while (cap < vocab.merges.size() * 2) cap *= 2;
  table_.assign(cap, Merge{kEmpty, 0, 0});
  mask_ = cap - 1;
  std::string joined;
  for (size_t rank = 0; rank < vocab.merges.size(); ++rank) {
    const std::string_view m = vocab.merges[rank];
    const size_t sp = m.find(' ', 1);  // validated by load_vocab
    const std::string_view l = m.substr(0, sp), r = m.substr(sp + 1);
    joined.assign(l).append(r);
    const uint64_t key = pair_key(sym_of(l), sym_of(r));
    const int32_t result = sym_of(joined);
    for (uint64_t i = hash(key) & mask_;; i = (i + 1) & mask_) {
      if (table_[i].key == key) break;  // a repeated pair keeps its first rank
      if (table_[i].key == kEmpty) {
        table_[i] = {key, static_cast<int32_t>(rank), result};
        break;
      }
    }
  }

  for (int b = 0; b < 256; ++b) {
    const std::string_view symbol = byte_to_symbol(static_cast<uint8_t>(b));
    const int32_t id = vocab.find(symbol);
    const auto it = extra.find(symbol);
    sym_of_byte_[b] = id >= 0 ? id : it != extra.end() ? it->second : -1;
    for (char c : symbol) {
      const int32_t one = vocab.find(std::string_view(&c, 1));
      if (one >= 0) fallback_[b].push_back(one);
    }
  }
}

const BpeModel::Merge* BpeModel::find_merge(int32_t left, int32_t right) const {
  if (left < 0 || right < 0) return nullptr;
  const uint64_t key = pair_key(left, right);
  for (uint64_t i = hash(key) & mask_;; i = (i + 1) & mask_) {
    if (table_[i].key == key) return &table_[i];
    if (table_[i].key == kEmpty) return nullptr;
  }
}

void BpeModel::try_add(Scratch& s, int32_t left, int32_t right) const {
  if (left < 0 || right < 0) return;
  const auto& l = s.symbols[left];
  const auto& r = s.symbols[right];
  const Merge* m = find_merge(l.sym, r.sym);
  if (!m) return;
  s.heap.push_back({left, right, m->rank, m->result, l.n + r.n});
  std::push_heap(s.heap.begin(), s.heap.end(), later);
}

void BpeModel::encode_word(std::string_view word, Scratch& s, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (vocab_.ignore_merges) {
    s.encoded.clear();
    append_byte_symbols(word, s.encoded);
    const int32_t id = vocab_.find(s.encoded);
    if (id >= 0) {
      out.push_back(id);
      return;
    }
  }

  s.symbols.clear();
  s.heap.clear();
  const int32_t n = static_cast<int32_t>(word.size());
  for (int32_t i = 0; i < n; ++i)
    s.symbols.push_back({sym_of_byte_[static_cast<uint8_t>(word[i])], i - 1, i + 1 == n ? -1 : i + 1,
                         static_cast<uint32_t>(i), 1});
  for (int32_t i = 1; i < n; ++i) try_add(s, i - 1, i);

  while (!s.heap.empty()) {
    std::pop_heap(s.heap.begin(), s.heap.end(), later);
    const Scratch::Bigram b = s.heap.back();
    s.heap.pop_back();
    auto& l = s.symbols[b.left];
    auto& r = s.symbols[b.right];
    // Stale: one side was merged away or has grown since the pair was queued.
    if (l.n == 0 || r.n == 0 || l.n + r.n != b.size) continue;
    l.n += r.n;
    l.sym = b.result;
    r.n = 0;
    l.next = r.next;
    if (r.next >= 0) s.symbols[r.next].prev = b.left;
    try_add(s, l.prev, b.left);
    try_add(s, b.left, l.next);
  }

  for (int32_t i = 0; i != -1; i = s.symbols[i].next) {
    const auto& sym = s.symbols[i];
    if (sym.sym >= 0 && sym.sym < vocab_.n_vocab()) {
      out.push_back(sym.sym);
      continue;
    }
    for (uint32_t k = 0; k < sym.n; ++k) {
      const auto& fb = fallback_[static_cast<uint8_t>(word[sym.offset + k])];
      out.insert(out.end(), fb.begin(), fb.end());
    }
  }
}

}  // namespace colibri
