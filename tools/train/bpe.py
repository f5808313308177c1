"""Byte-level BPE (GPT-2 style): trainer, encoder, decoder.

Text is split into pre-tokens with the GPT-2 regex, each pre-token's UTF-8
bytes are mapped to printable characters with GPT-2's byte-to-unicode table,
and merges are applied in rank order inside each pre-token. This is what
llama.cpp does for `tokenizer.ggml.model = "gpt2"`, `tokenizer.ggml.pre =
"gpt-2"`, so ids produced here are the ids the engine must produce.

Vocabulary layout: ids 0..255 are the single bytes in byte order, then one id
per merge result in merge order, then the special `<|endoftext|>` last.
"""

import collections
import json

import regex

# llama.cpp's gpt-2 regex has no trailing `|\s+`; it keeps unmatched text as
# its own piece, which gives the same split as the original GPT-2 pattern.
GPT2_PATTERN = regex.compile(
    r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")

EOT = "<|endoftext|>"


def bytes_to_unicode():
    """GPT-2's table: printable bytes map to themselves, the others to 256+n."""
    bs = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
          + list(range(ord("®"), ord("ÿ") + 1)))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


BYTE_TO_CHAR = bytes_to_unicode()
CHAR_TO_BYTE = {c: b for b, c in BYTE_TO_CHAR.items()}


def pretokenize(text):
    return GPT2_PATTERN.findall(text)


def to_symbols(piece):
    return "".join(BYTE_TO_CHAR[b] for b in piece.encode("utf-8"))


def train(text, vocab_size, log=None):
    """Returns (tokens, merges). Ties between equally frequent pairs go to the
    lexicographically smallest pair, so training is deterministic."""
    n_merges = vocab_size - 256 - 1
    word_counts = collections.Counter(to_symbols(p) for p in pretokenize(text))
    words = [list(w) for w in word_counts]
    counts = list(word_counts.values())

    pair_counts = collections.Counter()
    pair_where = collections.defaultdict(set)
    for i, w in enumerate(words):
        for a, b in zip(w, w[1:]):
            pair_counts[(a, b)] += counts[i]
            pair_where[(a, b)].add(i)

    tokens = [BYTE_TO_CHAR[b] for b in range(256)]
    known = set(tokens)
    merges = []
    while len(tokens) < 256 + n_merges and pair_counts:
        best = min(pair_counts.items(), key=lambda kv: (-kv[1], kv[0]))[0]
        if pair_counts[best] < 2:
            break
        merged = best[0] + best[1]
        merges.append(best)
        if merged not in known:
            known.add(merged)
            tokens.append(merged)
        for i in list(pair_where[best]):
            w = words[i]
            c = counts[i]
            for a, b in zip(w, w[1:]):
                pair_counts[(a, b)] -= c
                if pair_counts[(a, b)] <= 0:
                    del pair_counts[(a, b)]
                pair_where[(a, b)].discard(i)
            out = []
            j = 0
            while j < len(w):
                if j + 1 < len(w) and w[j] == best[0] and w[j + 1] == best[1]:
                    out.append(merged)
                    j += 2
                else:
                    out.append(w[j])
                    j += 1
            words[i] = out
            for a, b in zip(out, out[1:]):
                pair_counts[(a, b)] += c
                pair_where[(a, b)].add(i)
        pair_where.pop(best, None)
        if log and len(merges) % 500 == 0:
            log(f"bpe: {len(merges)} merges, last {merged!r}")
    tokens.append(EOT)
    return tokens, merges


class Tokenizer:
    def __init__(self, tokens, merges):
        self.tokens = list(tokens)
        self.merges = [tuple(m) for m in merges]
        self.token_to_id = {}
        for i, t in enumerate(self.tokens):
            self.token_to_id.setdefault(t, i)
        self.rank = {m: r for r, m in enumerate(self.merges)}
        self.eot_id = self.token_to_id.get(EOT)
        self.cache = {}

    @classmethod
    def load(cls, path):
        with open(path, encoding="utf-8") as f:
            d = json.load(f)
        return cls(d["tokens"], [m.split(" ") for m in d["merges"]])

    def save(self, path):
        with open(path, "w", encoding="utf-8") as f:
            json.dump({"tokens": self.tokens,
                       "merges": [a + " " + b for a, b in self.merges]}, f, ensure_ascii=False)

    def encode_piece(self, piece):
        """Rank-ordered merging inside one pre-token: repeatedly merge every
        occurrence of the adjacent pair with the lowest merge rank."""
        if piece in self.cache:
            return self.cache[piece]
        syms = list(to_symbols(piece))
        while len(syms) > 1:
            ranked = [(self.rank.get((a, b), None), k) for k, (a, b) in enumerate(zip(syms, syms[1:]))]
            ranked = [(r, k) for r, k in ranked if r is not None]
            if not ranked:
                break
            pair = self.merges[min(ranked)[0]]
            out = []
            j = 0
            while j < len(syms):
                if j + 1 < len(syms) and syms[j] == pair[0] and syms[j + 1] == pair[1]:
                    out.append(pair[0] + pair[1])
                    j += 2
                else:
                    out.append(syms[j])
                    j += 1
            syms = out
        ids = [self.token_to_id[s] for s in syms]
        self.cache[piece] = ids
        return ids

    def encode(self, text):
        ids = []
        for piece in pretokenize(text):
            ids.extend(self.encode_piece(piece))
        return ids

    def decode(self, ids):
        data = bytearray()
        for i in ids:
            t = self.tokens[i]
            if t == EOT:
                data.extend(t.encode("utf-8"))
            else:
                data.extend(CHAR_TO_BYTE[c] for c in t)
        return data.decode("utf-8", errors="replace")
