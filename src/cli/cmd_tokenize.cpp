// colibri tokenize: print the token ids of a text (and, with --pieces, each
// token's text).
#include <cstdio>

#include "cli/commands.h"
#include "formats/gguf.h"
#include "tokenizer/tokenizer.h"

namespace colibri::cli {

namespace {
struct TokenizeArgs {
  std::string model, prompt;
  bool no_special = false, parse_special = false, pieces = false;
};
}  // namespace

Runner add_tokenize(CLI::App& app) {
  auto a = std::make_shared<TokenizeArgs>();
  CLI::App* c = app.add_subcommand("tokenize", "print the token ids of a text");
  c->add_option("-m,--model", a->model, "model or vocabulary file (GGUF)")->required();
  c->add_option("-p,--prompt", a->prompt, "text to tokenize")->required();
  c->add_flag("--no-bos", a->no_special, "do not add BOS/EOS as the vocabulary would");
  c->add_flag("--parse-special", a->parse_special, "recognise special-token text");
  c->add_flag("--pieces", a->pieces, "print each token's text beside its id");
  return [a] {
    auto f = GgufFile::open(a->model);
    auto tok = Tokenizer::from_gguf(*f);
    std::vector<int32_t> ids = tok->encode(a->prompt, !a->no_special, a->parse_special);
    if (a->pieces) {
      for (int32_t id : ids)
        std::printf("%6d '%s'\n", id, tok->token_to_piece(id).c_str());
    } else {
      std::printf("[");
      for (size_t i = 0; i < ids.size(); ++i) std::printf(i ? ", %d" : "%d", ids[i]);
      std::printf("]\n");
    }
    return 0;
  };
}

COLIBRI_COMMAND(add_tokenize);

}  // namespace colibri::cli
