#!/usr/bin/python3
"""Pre-tokenizer word splits computed with Python's `regex` module from the
models' own split patterns: DeepSeek-V3 and Kimi-K2, whose vocabularies are not
in ../shared, and o200k (GPT-OSS) as a second check beside gptoss.out.

DeepSeek-V3's tokenizer.json pre-tokenizes with a Sequence of three
Split(pattern, behavior="Isolated") steps; each step cuts every piece left by
the previous one into its matches and the text between them. Kimi-K2's
tokenization_kimi.py gives one pattern to tiktoken, which keeps the matches
(the pattern matches every character, so nothing lies between them). The
patterns below are the models' own, verbatim: Kimi-K2's class intersections
(&&) and (?i:...) groups need the `regex` module's VERSION1 syntax.

The words of each of the 46 strings of llamacpp-tests.inp, then of EXTRA, go to
reference/pre_splits.json; test_tokenizer compares colibri's PCRE2
pre-tokenizers with them. deepseek_v3.out has the ids DeepSeek-V3's tokenizer
gives for the same strings, but without DeepSeek-V3's vocabulary the ids
cannot be turned back into words, so the splits are checked this way.

Usage: /usr/bin/python3 tests/tokenizer/make_split_reference.py [SHARED_DIR]
(Debian 12: python3-regex)
"""
import json
import os
import sys
import unicodedata

import regex

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "..", "..", "shared")
INPUTS = os.path.join(SHARED, "data", "tokenizer-vectors", "llamacpp-tests.inp")
OUT = os.path.join(HERE, "reference", "pre_splits.json")

# DeepSeek-V3 (and V3.1, V3.2, R1) tokenizer.json, pre_tokenizer.pretokenizers[0..2].
DEEPSEEK_V3 = [
    r"\p{N}{1,3}",
    r"[一-龥぀-ゟ゠-ヿ]+",
    r"[!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
]

# Kimi-K2 tokenization_kimi.py, TikTokenTokenizer.pat_str.
KIMI_K2 = "|".join([
    r"""[\p{Han}]+""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""\p{N}{1,3}""",
    r""" ?[^\s\p{L}\p{N}]+[\r\n]*""",
    r"""\s*[\r\n]+""",
    r"""\s+(?!\S)""",
    r"""\s+""",
])


# More strings where the two patterns differ from their neighbours: Han next
# to Latin, kana and Hangul, long digit runs, contractions after capitals, an
# ASCII symbol before a Latin word, combining marks, full-width forms.
EXTRA = [
    "中文abc混合English日本語のテキスト한국어123",
    "DeepSeek-V3 costs $5,576,000; 1234567 tokens/s.",
    "I'M SURE IT'S FINE, they'll've done it; \u017f'\u017f it'\u017f",
    "def f(x):\n\treturn x**2  # 平方\n\n\n",
    "naïve café e\u0301 \u0915\u094d\u0937 \u17a2\u17b6\u1785",
    "ＡＢＣ１２３！？。、「引用」",
    "@user #tag_name __init__ ...end",
    "カタカナとひらがな、漢字（かんじ）",
]


# o200k_base (GPT-4o, GPT-OSS): tiktoken's openai_public.py pattern, also the
# Split regex of GPT-OSS's tokenizer.json.
O200K = "|".join([
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""\p{N}{1,3}""",
    r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
    r"""\s*[\r\n]+""",
    r"""\s+(?!\S)""",
    r"""\s+""",
])


def split_isolated(pieces, pattern):
    out = []
    for piece in pieces:
        pos = 0
        for m in pattern.finditer(piece):
            if m.start() == m.end():
                continue
            if m.start() > pos:
                out.append(piece[pos:m.start()])
            out.append(m.group())
            pos = m.end()
        if pos < len(piece):
            out.append(piece[pos:])
    return out


def main():
    with open(INPUTS, encoding="utf-8", newline="") as f:
        text = f.read()
    strings = text.split("\n__ggml_vocab_test__\n")
    if strings and strings[-1] == "":
        strings.pop()
    strings += EXTRA
    deepseek = [regex.compile(p, regex.VERSION1) for p in DEEPSEEK_V3]
    kimi = regex.compile(KIMI_K2, regex.VERSION1)
    o200k = regex.compile(O200K, regex.VERSION1)
    result = {"inputs": "llamacpp-tests.inp", "extra": EXTRA, "regex": regex.__version__,
              "unicode": unicodedata.unidata_version, "deepseek-v3": [], "kimi-k2": [],
              "gpt-4o": []}
    for s in strings:
        pieces = [s] if s else []
        for p in deepseek:
            pieces = split_isolated(pieces, p)
        result["deepseek-v3"].append(pieces)
        words = [m.group() for m in kimi.finditer(s)]
        assert "".join(words) == s, "the Kimi-K2 pattern left characters unmatched"
        result["kimi-k2"].append(words)
        words = [m.group() for m in o200k.finditer(s)]
        assert "".join(words) == s, "the o200k pattern left characters unmatched"
        result["gpt-4o"].append(words)
    # One line per string, so that a change shows as a readable diff.
    lines = ["{"]
    for key in ("inputs", "extra", "regex", "unicode"):
        lines.append(f"{json.dumps(key)}: {json.dumps(result[key], ensure_ascii=False)},")
    for key in ("deepseek-v3", "kimi-k2", "gpt-4o"):
        rows = [json.dumps(w, ensure_ascii=False) for w in result[key]]
        lines.append(f"{json.dumps(key)}: [\n" + ",\n".join(rows) + "\n]" +
                     ("" if key == "gpt-4o" else ","))
    lines.append("}")
    with open(OUT, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    print(f"{len(strings)} strings")


if __name__ == "__main__":
    main()
