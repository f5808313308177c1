// The C API (include/colibri.h) over Engine. Every entry point catches
// everything: errors become status codes and colibri_last_error().
#include "colibri.h"

#include <cstring>
#include <new>
#include <string>

#include "base/error.h"
#include "base/sys.h"
#include "engine/engine.h"
#include "engine/sampler.h"

struct colibri_engine {
  std::unique_ptr<colibri::Engine> engine;
  int pos = 0;
  uint64_t n_tokens = 0;
  double forward_s = 0;
  std::vector<uint64_t> usage;
};

namespace {

thread_local std::string g_last_error;

colibri_status set_error(colibri_status s, const std::string& msg) {
  g_last_error = msg;
  return s;
}

template <typename Fn>
colibri_status guard(colibri_status on_error, Fn&& fn) {
  try {
    return fn();
  } catch (const colibri::Error& e) {
    return set_error(on_error, e.what());
  } catch (const std::bad_alloc&) {
    return set_error(COLIBRI_ERR_OUT_OF_MEMORY, "out of memory");
  } catch (const std::exception& e) {
    return set_error(COLIBRI_ERR_INTERNAL, e.what());
  } catch (...) {
    return set_error(COLIBRI_ERR_INTERNAL, "unknown error");
  }
}

}  // namespace

extern "C" {

void colibri_default_options(colibri_options* o) {
  if (!o) return;
  o->n_ctx = 4096;
  o->n_threads = 0;
  o->precision = COLIBRI_PRECISION_NATIVE;
  o->kv_type = COLIBRI_KV_F16;
}

colibri_status colibri_init(const char* model_path, const colibri_options* options,
                            colibri_engine** out) {
  if (!model_path || !out) return set_error(COLIBRI_ERR_INVALID_ARGUMENT, "model_path and out must not be NULL");
  *out = nullptr;
  colibri_options o;
  colibri_default_options(&o);
  if (options) o = *options;
  if (o.precision != COLIBRI_PRECISION_NATIVE && o.precision != COLIBRI_PRECISION_REFERENCE)
    return set_error(COLIBRI_ERR_INVALID_ARGUMENT, "options.precision must be 0 or 1");
  if (o.kv_type != COLIBRI_KV_F16 && o.kv_type != COLIBRI_KV_F32 && o.kv_type != COLIBRI_KV_Q8_0 &&
      o.kv_type != COLIBRI_KV_Q4_0)
    return set_error(COLIBRI_ERR_INVALID_ARGUMENT,
                     "options.kv_type must be 0 (f16), 1 (f32), 2 (q8_0) or 3 (q4_0)");
  return guard(COLIBRI_ERR_MODEL, [&] {
    colibri::EngineOptions eo;
    eo.model_path = model_path;
    eo.n_ctx = o.n_ctx;
    eo.n_threads = o.n_threads;
    eo.n_batch = 1;
    eo.kv_type = o.kv_type == COLIBRI_KV_F32    ? colibri::DType::F32
                 : o.kv_type == COLIBRI_KV_Q8_0 ? colibri::DType::Q8_0
                 : o.kv_type == COLIBRI_KV_Q4_0 ? colibri::DType::Q4_0
                                                : colibri::DType::F16;
    eo.precision = o.precision == COLIBRI_PRECISION_REFERENCE ? colibri::Precision::kReference
                                                             : colibri::Precision::kNative;
    auto e = std::make_unique<colibri_engine>();
    e->engine = std::make_unique<colibri::Engine>(eo);
    *out = e.release();
    return COLIBRI_OK;
  });
}

colibri_status colibri_forward(colibri_engine* e, int32_t token, float* logits, int32_t* next_token) {
  if (!e) return set_error(COLIBRI_ERR_INVALID_ARGUMENT, "engine is NULL");
  colibri::Engine& en = *e->engine;
  if (token < 0 || token >= en.n_vocab())
    return set_error(COLIBRI_ERR_INVALID_ARGUMENT,
                     colibri::strprintf("token %d is outside the vocabulary (%d)", token, en.n_vocab()));
  if (e->pos >= en.n_ctx())
    return set_error(COLIBRI_ERR_CONTEXT_FULL,
                     colibri::strprintf("context is full (%d tokens)", en.n_ctx()));
  return guard(COLIBRI_ERR_INTERNAL, [&] {
    const double t0 = colibri::now_seconds();
    const float* l = en.eval_token(token, 0, e->pos);
    ++e->pos;
    ++e->n_tokens;
    if (logits) std::memcpy(logits, l, sizeof(float) * en.n_vocab());
    if (next_token) *next_token = colibri::argmax(l, en.n_vocab());
    e->forward_s += colibri::now_seconds() - t0;
    return COLIBRI_OK;
  });
}

colibri_status colibri_reset(colibri_engine* e) {
  if (!e) return set_error(COLIBRI_ERR_INVALID_ARGUMENT, "engine is NULL");
  e->pos = 0;
  return COLIBRI_OK;
}

void colibri_free(colibri_engine* e) { delete e; }

colibri_status colibri_get_stats(colibri_engine* e, colibri_stats* out) {
  if (!e || !out) return set_error(COLIBRI_ERR_INVALID_ARGUMENT, "engine and out must not be NULL");
  return guard(COLIBRI_ERR_INTERNAL, [&] {
    colibri::Engine& en = *e->engine;
    const colibri::ModelConfig& c = en.config();
    colibri::EngineStats s = en.stats();
    std::memset(out, 0, sizeof *out);
    out->n_tokens = e->n_tokens;
    out->forward_seconds = e->forward_s;
    out->load_seconds = s.load_s;
    out->peak_rss_bytes = s.peak_rss;
    out->n_layer = c.n_layer;
    out->n_expert = c.n_expert;
    out->n_expert_used = c.n_expert_used;
    if (c.is_moe()) {
      e->usage = en.transformer().expert_usage();
      out->expert_usage = e->usage.data();
    }
    out->expert_requests = s.store.requests;
    out->expert_hits = s.store.hits;
    out->expert_bytes_read = s.store.bytes_read;
    return COLIBRI_OK;
  });
}

int32_t colibri_n_vocab(const colibri_engine* e) { return e ? e->engine->n_vocab() : -1; }
int32_t colibri_bos_token(const colibri_engine* e) { return e ? e->engine->tokenizer().bos() : -1; }
int32_t colibri_is_eog(const colibri_engine* e, int32_t token) {
  return e && e->engine->tokenizer().is_eog(token) ? 1 : 0;
}

int32_t colibri_tokenize(colibri_engine* e, const char* text, int32_t add_special, int32_t* tokens,
                         int32_t max_tokens) {
  if (!e || !text || (max_tokens > 0 && !tokens)) {
    set_error(COLIBRI_ERR_INVALID_ARGUMENT, "engine, text and tokens must not be NULL");
    return -COLIBRI_ERR_INVALID_ARGUMENT;
  }
  int32_t n = -1;
  colibri_status s = guard(COLIBRI_ERR_INTERNAL, [&] {
    std::vector<int32_t> ids = e->engine->tokenizer().encode(text, add_special != 0, false);
    for (int32_t i = 0; i < max_tokens && i < static_cast<int32_t>(ids.size()); ++i) tokens[i] = ids[i];
    n = static_cast<int32_t>(ids.size());
    return COLIBRI_OK;
  });
  return s == COLIBRI_OK ? n : -static_cast<int32_t>(s);
}

int64_t colibri_detokenize(colibri_engine* e, const int32_t* tokens, int32_t n_tokens, char* buf,
                           size_t cap) {
  if (!e || (n_tokens > 0 && !tokens) || (cap > 0 && !buf)) {
    set_error(COLIBRI_ERR_INVALID_ARGUMENT, "engine, tokens and buf must not be NULL");
    return -COLIBRI_ERR_INVALID_ARGUMENT;
  }
  int64_t n = -1;
  colibri_status s = guard(COLIBRI_ERR_INVALID_ARGUMENT, [&] {
    std::string text = e->engine->tokenizer().decode(std::span<const int32_t>(tokens, n_tokens));
    if (cap > 0) {
      size_t m = std::min(cap - 1, text.size());
      std::memcpy(buf, text.data(), m);
      buf[m] = '\0';
    }
    n = static_cast<int64_t>(text.size());
    return COLIBRI_OK;
  });
  return s == COLIBRI_OK ? n : -static_cast<int64_t>(s);
}

const char* colibri_last_error(void) { return g_last_error.c_str(); }

}  // extern "C"
