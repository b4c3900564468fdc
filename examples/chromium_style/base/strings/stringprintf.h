// printf-style formatting into std::string.

#ifndef BASE_STRINGS_STRINGPRINTF_H_
#define BASE_STRINGS_STRINGPRINTF_H_

#include <string>

namespace base {

std::string StringPrintf(const char* format, ...)
    __attribute__((format(printf, 1, 2)));

}  // namespace base

#endif  // BASE_STRINGS_STRINGPRINTF_H_
