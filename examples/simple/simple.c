/* Greedy generation through the C API:
 *   simple MODEL.gguf [PROMPT] [N]
 * prints the prompt, the generated text, and the expert usage per layer. */
#include <colibri.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s MODEL.gguf [PROMPT] [N]\n", argv[0]);
    return 2;
  }
  const char* prompt = argc > 2 ? argv[2] : "";
  int n_predict = argc > 3 ? atoi(argv[3]) : 32;

  colibri_options opt;
  colibri_default_options(&opt);
  opt.n_ctx = 512;
  opt.n_threads = 1;
  colibri_engine* e = NULL;
  if (colibri_init(argv[1], &opt, &e) != COLIBRI_OK) {
    fprintf(stderr, "error: %s\n", colibri_last_error());
    return 1;
  }

  int32_t ids[512];
  int32_t n = colibri_tokenize(e, prompt, 1, ids, 512);
  if (n < 0 || n > 512) {
    fprintf(stderr, "error: %s\n", n < 0 ? colibri_last_error() : "prompt too long");
    colibri_free(e);
    return 1;
  }
  if (n == 0) ids[n++] = colibri_bos_token(e);

  int32_t next = -1;
  for (int32_t i = 0; i < n; ++i)
    if (colibri_forward(e, ids[i], NULL, &next) != COLIBRI_OK) goto fail;

  char text[4096];
  int32_t out[1024];
  int n_out = 0;
  for (int i = 0; i < n_predict && n_out < 1024; ++i) {
    if (colibri_is_eog(e, next)) break;
    out[n_out++] = next;
    if (colibri_forward(e, next, NULL, &next) != COLIBRI_OK) goto fail;
  }
  if (colibri_detokenize(e, out, n_out, text, sizeof text) < 0) goto fail;
  printf("%s\n", text);

  colibri_stats s;
  if (colibri_get_stats(e, &s) != COLIBRI_OK) goto fail;
  fprintf(stderr, "%llu tokens, %.1f tok/s\n", (unsigned long long)s.n_tokens,
          s.forward_seconds > 0 ? s.n_tokens / s.forward_seconds : 0.0);
  for (int l = 0; l < s.n_layer && s.expert_usage; ++l) {
    fprintf(stderr, "layer %d expert usage:", l);
    for (int x = 0; x < s.n_expert; ++x)
      fprintf(stderr, " %llu", (unsigned long long)s.expert_usage[l * s.n_expert + x]);
    fprintf(stderr, "\n");
  }
  colibri_free(e);
  return 0;

fail:
  fprintf(stderr, "error: %s\n", colibri_last_error());
  colibri_free(e);
  return 1;
}
