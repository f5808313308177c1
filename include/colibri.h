/* colibri C API.
 *
 * A model is loaded once (colibri_init), then fed one token at a time
 * (colibri_forward), which returns the next-token logits and/or the greedy
 * next token. Every function reports failure through a status code; the
 * message is in colibri_last_error(). No C++ exception crosses this header.
 */
#ifndef COLIBRI_H
#define COLIBRI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct colibri_engine colibri_engine;

typedef enum {
  COLIBRI_OK = 0,
  COLIBRI_ERR_INVALID_ARGUMENT = 1, /* a null pointer, a token outside the vocabulary */
  COLIBRI_ERR_MODEL = 2,            /* the file is missing, corrupt or unsupported */
  COLIBRI_ERR_CONTEXT_FULL = 3,     /* no position left: colibri_reset to start over */
  COLIBRI_ERR_OUT_OF_MEMORY = 4,
  COLIBRI_ERR_INTERNAL = 5
} colibri_status;

typedef enum {
  COLIBRI_PRECISION_NATIVE = 0,   /* activations quantized to the weights' dot type (as llama.cpp) */
  COLIBRI_PRECISION_REFERENCE = 1 /* weights dequantized to F32, F32 products */
} colibri_precision;

typedef enum {
  COLIBRI_KV_F16 = 0, /* half the memory (llama.cpp's default) */
  COLIBRI_KV_F32 = 1, /* the products exactly as computed */
  /* blocks of 32 int8 and a scale: 53% of f16's bytes (llama.cpp's q8_0 cache) */
  COLIBRI_KV_Q8_0 = 2,
  /* blocks of 32 4-bit values and a scale: 28% of f16's bytes (llama.cpp's q4_0 cache) */
  COLIBRI_KV_Q4_0 = 3
} colibri_kv_type;

typedef struct {
  int32_t n_ctx;     /* context length in tokens; 0: the model's */
  int32_t n_threads; /* 0: all cores */
  int32_t precision; /* colibri_precision */
  int32_t kv_type;   /* colibri_kv_type: how the KV cache stores keys and values */
} colibri_options;

typedef struct {
  uint64_t n_tokens;         /* tokens fed through colibri_forward */
  double forward_seconds;    /* time spent in colibri_forward */
  double load_seconds;
  uint64_t peak_rss_bytes;
  int32_t n_layer;
  int32_t n_expert;          /* 0 for a dense model */
  int32_t n_expert_used;
  /* (n_layer * n_expert) routed-token counts, layer-major; valid until the
   * next call on this engine. NULL for a dense model. */
  const uint64_t* expert_usage;
  uint64_t expert_requests;  /* expert slabs asked of the expert store */
  uint64_t expert_hits;      /* of those, served without waiting on a load */
  uint64_t expert_bytes_read;
} colibri_stats;

/* Fills *o with the defaults. */
void colibri_default_options(colibri_options* o);

/* Loads a GGUF model. options may be NULL (defaults). On success *out owns the
 * engine; free it with colibri_free. */
colibri_status colibri_init(const char* model_path, const colibri_options* options,
                            colibri_engine** out);

/* Feeds `token` at the next position. logits (n_vocab floats) and next_token
 * (the argmax) may each be NULL. */
colibri_status colibri_forward(colibri_engine* e, int32_t token, float* logits,
                               int32_t* next_token);

/* Forgets the conversation: the next token goes to position 0. */
colibri_status colibri_reset(colibri_engine* e);

void colibri_free(colibri_engine* e);

colibri_status colibri_get_stats(colibri_engine* e, colibri_stats* out);

int32_t colibri_n_vocab(const colibri_engine* e);
int32_t colibri_bos_token(const colibri_engine* e); /* -1 if none */
int32_t colibri_is_eog(const colibri_engine* e, int32_t token);

/* Tokenizes text (add_special: BOS as the vocabulary says). Returns the number
 * of tokens; if it exceeds max_tokens, only max_tokens were written. Negative
 * on error. */
int32_t colibri_tokenize(colibri_engine* e, const char* text, int32_t add_special,
                         int32_t* tokens, int32_t max_tokens);

/* Writes the text of tokens into buf (NUL-terminated, truncated to cap).
 * Returns the full length in bytes, negative on error. */
int64_t colibri_detokenize(colibri_engine* e, const int32_t* tokens, int32_t n_tokens, char* buf,
                           size_t cap);

/* The message of the last failure on this thread. */
const char* colibri_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* COLIBRI_H */
