#include "base/error.h"

#include <cstdio>
#include <cstdlib>

namespace colibri {

std::string vstrprintf(const char* fmt, va_list ap) {
  va_list copy;
  va_copy(copy, ap);
  int n = std::vsnprintf(nullptr, 0, fmt, copy);
  va_end(copy);
  if (n < 0) return fmt;
  std::string out(static_cast<size_t>(n), '\0');
  std::vsnprintf(out.data(), out.size() + 1, fmt, ap);
  return out;
}

std::string strprintf(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::string s = vstrprintf(fmt, ap);
  va_end(ap);
  return s;
}

void fail(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::string s = vstrprintf(fmt, ap);
  va_end(ap);
  throw Error(s);
}

void assert_failed(const char* cond, const char* file, int line) {
  std::fprintf(stderr, "colibri: internal invariant failed: %s (%s:%d)\n", cond, file, line);
  std::abort();
}

}  // namespace colibri
