// printf-style formatting into std::string.

#include "base/strings/stringprintf.h"

#include <cstdarg>
#include <cstdio>

namespace base {

std::string StringPrintf(const char* format, ...) {
  va_list args;
  va_start(args, format);
  va_list args_copy;
  va_copy(args_copy, args);
  const int length = std::vsnprintf(nullptr, 0, format, args);
  va_end(args);
  std::string result;
  if (length > 0) {
    result.resize(static_cast<size_t>(length) + 1);
    std::vsnprintf(result.data(), result.size(), format, args_copy);
    result.resize(static_cast<size_t>(length));
  }
  va_end(args_copy);
  return result;
}

}  // namespace base
