// Errors and invariants.
//
// Untrusted input (files, prompts, requests) is checked with CLB_CHECK, which
// throws colibri::Error carrying one line that says what and where
// ("tensor blk.3.ffn_up_exps: expected 3 dims, file has 2"). The C API and the
// CLI catch it at their edge; no exception crosses include/colibri.h.
// Programming invariants use CLB_ASSERT, which aborts and stays on in release
// builds.
#pragma once

#include <cstdarg>
#include <stdexcept>
#include <string>

namespace colibri {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

std::string strprintf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string vstrprintf(const char* fmt, va_list ap);

[[noreturn]] void fail(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

[[noreturn]] void assert_failed(const char* cond, const char* file, int line);

}  // namespace colibri

#define CLB_CHECK(cond, ...)        \
  do {                              \
    if (!(cond)) [[unlikely]]       \
      ::colibri::fail(__VA_ARGS__); \
  } while (0)

#define CLB_ASSERT(cond)                                              \
  do {                                                                \
    if (!(cond)) [[unlikely]]                                         \
      ::colibri::assert_failed(#cond, __FILE__, __LINE__);            \
  } while (0)
