// Failure reporting for CHECK().

#include <cstdio>
#include <cstdlib>

#include "base/check.h"

namespace base {

void CheckFailed(const char* file, int line, const char* condition) {
  std::fprintf(stderr, "%s:%d: CHECK failed: %s\n", file, line, condition);
  std::fflush(stderr);
  std::abort();
}

}  // namespace base
