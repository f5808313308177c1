#include "tokenizer/pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "base/error.h"

namespace colibri {

namespace {

// The regexes, as the models' tokenizer.json files give them. Where llama.cpp
// rewrote a pattern for std::regex (e.g. (?i:'s|...) as '[sS]|...), its
// rewritten form is used when it means the same thing and avoids Unicode case
// folding ('ſ' would match (?i:'s) in PCRE2 but not in llama.cpp). o200k and
// Kimi-K2 keep the model's form: their reference is tiktoken, which folds, and
// for o200k llama.cpp already differs from the model elsewhere (\p{M}, below).

// GPT-2: contractions, letters, digits, other symbols, each with an optional
// leading space, then whitespace that does not steal the space before a word.
constexpr std::string_view kGpt2 =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// Llama-3 / cl100k: digits in runs of at most three, newlines kept with the
// whitespace before them.
constexpr std::string_view kLlama3 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Qwen2: as Llama-3 with single digits.
constexpr std::string_view kQwen2 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Qwen3.5: as Qwen2 with combining marks kept inside words.
constexpr std::string_view kQwen35 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// o200k (GPT-4o, gpt-oss): words split at lower-to-upper case changes. As the
// model writes it; llama.cpp's rewrite ((?=[\p{L}])[^a-z] for the cased
// letters) leaves combining marks out of words, which splits Khmer differently
// from GPT-OSS's own tokenizer (2 of llama.cpp's 46 test strings).
constexpr std::string_view kGpt4o =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Tekken (Mistral NeMo): o200k's word rule without contractions, single digits.
constexpr std::string_view kTekken =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Kimi-K2: Han runs first, then o200k's rule with Han excluded from letters.
// The model's pattern writes the exclusion as a class intersection
// ([\p{Lu}...&&[^\p{Han}]]), which PCRE2 spells with a lookahead. Its \p{Han}
// is the Script property (tiktoken's Rust regex); PCRE2 10.40+ reads a bare
// \p{Han} as Script_Extensions, which adds CJK punctuation such as 、 and 」,
// so the script is named as sc=Han. llama.cpp splits Kimi-K2 with its own
// code rather than a rewritten regex, so the contractions keep the model's
// (?i:...) form, Unicode case folding included (tiktoken folds 'ſ' to 's').
constexpr std::string_view kKimiK2 =
    R"(\p{sc=Han}+|[^\r\n\p{L}\p{N}]?(?:(?!\p{sc=Han})[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}])*(?:(?!\p{sc=Han})[\p{Ll}\p{Lm}\p{Lo}\p{M}])+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?(?:(?!\p{sc=Han})[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}])+(?:(?!\p{sc=Han})[\p{Ll}\p{Lm}\p{Lo}\p{M}])*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// DeepSeek-V3: digits and CJK/kana runs first; an ASCII symbol may lead a
// Latin word.
constexpr std::string_view kDeepseek3Main =
    R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// CJK ideographs (U+4E00..U+9FA5) with kana, and with U+0800.. and Hangul.
constexpr std::string_view kCjkKana = R"([\x{4E00}-\x{9FA5}\x{3040}-\x{309F}\x{30A0}-\x{30FF}]+)";
constexpr std::string_view kCjkHangul = R"([\x{4E00}-\x{9FA5}\x{800}-\x{4E00}\x{AC00}-\x{D7FF}]+)";

// DeepSeek LLM's word rule lists the cased letters (Lu, Ll, Lt) of its
// Unicode version range by range; kept as the model wrote it.
constexpr std::string_view kDeepseekLetters =
    R"(\s?[A-Za-z\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA}\x{1BC}-\x{1BF}\x{1C4}-\x{293})"
    R"(\x{295}-\x{2AF}\x{370}-\x{373}\x{376}\x{377}\x{37B}-\x{37D}\x{37F}\x{386}\x{388}-\x{38A})"
    R"(\x{38C}\x{38E}-\x{3A1}\x{3A3}-\x{3F5}\x{3F7}-\x{481}\x{48A}-\x{52F}\x{531}-\x{556})"
    R"(\x{10A0}-\x{10C5}\x{13A0}-\x{13F5}\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA}\x{1CBD}-\x{1CBF})"
    R"(\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A}\x{1E00}-\x{1F15}\x{1F18}-\x{1F1D})"
    R"(\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59}\x{1F5B}\x{1F5D})"
    R"(\x{1F5F}-\x{1F7D}\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-\x{1FC4})"
    R"(\x{1FC6}-\x{1FCC}\x{1FD0}-\x{1FD3}\x{1FD6}-\x{1FDB}\x{1FE0}-\x{1FEC}\x{1FF2}-\x{1FF4})"
    R"(\x{1FF6}-\x{1FFC}\x{2102}\x{2107}\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D}\x{2124})"
    R"(\x{2126}\x{2128}\x{212A}-\x{212D}\x{212F}-\x{2134}\x{2139}\x{213C}-\x{213F})"
    R"(\x{2145}-\x{2149}\x{214E}\x{2183}\x{2184}\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4})"
    R"(\x{2CEB}-\x{2CEE}\x{2CF2}\x{2CF3}\x{A640}-\x{A66D}\x{A680}-\x{A69B}\x{A722}-\x{A76F})"
    R"(\x{A771}-\x{A787}\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF}\x{FB00}-\x{FB06}\x{FB13}-\x{FB17})"
    R"(\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A}\x{10400}-\x{1044F}\x{104B0}-\x{104D3})"
    R"(\x{104D8}-\x{104FB}\x{10C80}-\x{10CB2}\x{10CC0}-\x{10CF2}\x{118A0}-\x{118DF})"
    R"(\x{1E900}-\x{1E943}]+)";
constexpr std::string_view kDeepseekPunct =
    R"(\s?[!-/:-~\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3000}-\x{3002}]+)";

// Text cut at whitespace and sentence punctuation (BLOOM, Poro, Viking).
constexpr std::string_view kBloom = R"( ?[^(\s|.,!?…。，、।۔،)]+)";

// Bailing-MoE: single digits, newlines not grouped.
constexpr std::string_view kBailing =
    R"('(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)";

// Seed-Coder: symbols never absorb newlines.
constexpr std::string_view kSeedCoder =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+)";

struct Entry {
  std::vector<std::string_view> aliases;
  PreTokenizerSpec spec;
};

// Flags follow llama.cpp's llama_vocab::impl::load for each name.
const std::vector<Entry>& table() {
  static const std::vector<Entry> t = [] {
    std::vector<Entry> e;
    auto add = [&](std::vector<std::string_view> aliases, std::vector<std::string_view> regexes,
                   bool clean_spaces, bool ignore_merges = false, bool add_bos = false,
                   bool no_bos = false) {
      PreTokenizerSpec s;
      s.name = aliases.front();
      s.regexes = std::move(regexes);
      s.clean_spaces = clean_spaces;
      s.ignore_merges = ignore_merges;
      s.add_bos = add_bos;
      s.no_bos = no_bos;
      e.push_back({std::move(aliases), std::move(s)});
    };
    add({"default"}, {R"([\p{P}\$\+<=>\^~\|]+)", kGpt2, R"(\p{N}+)", "[0-9][0-9][0-9]"}, true);
    add({"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral"}, {kLlama3}, true,
        /*ignore_merges=*/true, /*add_bos=*/true);
    add({"dbrx", "smaug-bpe"}, {kLlama3}, true);
    add({"chatglm-bpe", "glm4"}, {kLlama3}, true, false, false, /*no_bos=*/true);
    add({"deepseek-llm"},
        {"[\r\n]", kDeepseekLetters, kDeepseekPunct, R"(\s+$)", kCjkHangul, R"(\p{N}+)"}, false);
    add({"deepseek-coder"},
        {"[\r\n]", R"(\s?\p{L}+)", R"(\s?\p{P}+)", kCjkHangul, R"(\p{N})"}, false);
    // DeepSeek-V3/V3.1/V3.2/R1; Hunyuan's dense models and JoyAI reuse it.
    add({"deepseek-v3", "hunyuan-dense", "joyai-llm"}, {R"(\p{N}{1,3})", kCjkKana, kDeepseek3Main},
        false);
    add({"falcon"}, {R"([\p{P}\$\+<=>\^~\|`]+)", kGpt2, "[0-9][0-9][0-9]"}, true);
    add({"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "mpt",
         "olmo", "jais", "exaone4"},
        {kGpt2}, true);
    add({"trillion", "granite-docling"}, {kGpt2}, false);
    add({"starcoder", "refact", "codeshell", "exaone", "minerva-7b"}, {R"(\p{N})", kGpt2}, true);
    add({"command-r", "smollm"}, {R"(\p{N})", kGpt2}, false);
    add({"qwen2", "deepseek-r1-qwen", "hunyuan"}, {kQwen2}, false);
    add({"stablelm2", "megrez"}, {kQwen2}, true);
    add({"qwen35"}, {kQwen35}, false);
    add({"gpt-4o", "llama4", "minimax-m2"}, {kGpt4o}, false);
    add({"tekken"}, {kTekken}, false, /*ignore_merges=*/true, /*add_bos=*/true);
    add({"kimi-k2"}, {kKimiK2}, false);
    add({"bloom", "gpt3-finnish"}, {kBloom}, true);
    add({"poro-chat"}, {kBloom}, false);
    add({"viking"}, {kBloom, R"(\p{N})"}, false);
    add({"bailingmoe", "bailingmoe2", "llada-moe"}, {kBailing}, false);
    add({"seed-coder"}, {kSeedCoder}, false);
    add({"grok-2"}, {kQwen2}, false);
    return e;
  }();
  return t;
}

}  // namespace

const PreTokenizerSpec* find_pre_tokenizer(std::string_view pre) {
  if (pre.empty()) pre = "default";
  for (const Entry& e : table())
    for (std::string_view a : e.aliases)
      if (a == pre) return &e.spec;
  return nullptr;
}

std::vector<std::string_view> known_pre_tokenizers() {
  std::vector<std::string_view> names;
  for (const Entry& e : table()) names.insert(names.end(), e.aliases.begin(), e.aliases.end());
  return names;
}

struct PreTokenizer::Compiled {
  pcre2_code* code = nullptr;
  ~Compiled() { pcre2_code_free(code); }
};

PreTokenizer::PreTokenizer(const PreTokenizerSpec& spec) : spec_(spec) {
  for (std::string_view re : spec.regexes) {
    int err = 0;
    PCRE2_SIZE err_off = 0;
    auto c = std::make_unique<Compiled>();
    // DOLLAR_ENDONLY: '$' means the end of the piece, not "before a final
    // newline", as in the Rust and C++ regex engines the patterns come from.
    c->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(re.data()), re.size(),
                            PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY, &err, &err_off, nullptr);
    if (!c->code) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof(msg));
      fail("pre-tokenizer %.*s: regex %.*s does not compile at offset %zu: %s",
           static_cast<int>(spec.name.size()), spec.name.data(), static_cast<int>(re.size()),
           re.data(), static_cast<size_t>(err_off), reinterpret_cast<const char*>(msg));
    }
    // The JIT is an optimisation only; matching falls back to the interpreter.
    pcre2_jit_compile(c->code, PCRE2_JIT_COMPLETE);
    regexes_.push_back(std::move(c));
  }
}

PreTokenizer::~PreTokenizer() = default;

void PreTokenizer::split(std::string_view text,
                         std::vector<std::pair<size_t, size_t>>& words) const {
  using Piece = std::pair<size_t, size_t>;
  std::vector<Piece> cur{{0, text.size()}}, next;
  if (text.empty()) return;

  // One match block and JIT stack per call: the compiled patterns are shared
  // between threads, these are not. The JIT stack grows to 1 MiB for long
  // runs of whitespace under (?!\S).
  pcre2_match_data* md = pcre2_match_data_create(4, nullptr);
  pcre2_match_context* mctx = pcre2_match_context_create(nullptr);
  pcre2_jit_stack* jit_stack = pcre2_jit_stack_create(32 * 1024, 1024 * 1024, nullptr);
  CLB_CHECK(md && mctx && jit_stack, "pre-tokenizer: out of memory");
  pcre2_jit_stack_assign(mctx, nullptr, jit_stack);
  struct Release {
    pcre2_match_data* md;
    pcre2_match_context* mctx;
    pcre2_jit_stack* js;
    ~Release() {
      pcre2_match_data_free(md);
      pcre2_match_context_free(mctx);
      pcre2_jit_stack_free(js);
    }
  } release{md, mctx, jit_stack};

  for (const auto& re : regexes_) {
    next.clear();
    for (const Piece& piece : cur) {
      // The piece is the whole subject, so lookarounds and '$' stop at its
      // edges, as when the pieces are matched one by one.
      const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data() + piece.first);
      const size_t len = piece.second;
      size_t start = 0, emitted = 0;
      while (start < len) {
        const int rc = pcre2_match(re->code, subject, len, start, PCRE2_NO_UTF_CHECK, md, mctx);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
          PCRE2_UCHAR msg[256];
          pcre2_get_error_message(rc, msg, sizeof(msg));
          fail("pre-tokenizer %.*s: matching failed: %s", static_cast<int>(spec_.name.size()),
               spec_.name.data(), reinterpret_cast<const char*>(msg));
        }
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
        const size_t m0 = ov[0], m1 = ov[1];
        if (m1 == m0) {
          // An empty match cuts nothing; step over one character.
          start = m0 + 1;
          while (start < len && (subject[start] & 0xC0) == 0x80) ++start;
          continue;
        }
        if (m0 > emitted) next.emplace_back(piece.first + emitted, m0 - emitted);
        next.emplace_back(piece.first + m0, m1 - m0);
        emitted = start = m1;
      }
      if (emitted < len) next.emplace_back(piece.first + emitted, len - emitted);
    }
    cur.swap(next);
  }
  words.insert(words.end(), cur.begin(), cur.end());
}

}  // namespace colibri
