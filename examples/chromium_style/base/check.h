// CHECK(): invariant assertions that stay on in release builds.

#ifndef BASE_CHECK_H_
#define BASE_CHECK_H_

namespace base {

[[noreturn]] void CheckFailed(const char* file,
                              int line,
                              const char* condition);

}  // namespace base

#define CHECK(condition)                                       \
  do {                                                         \
    if (!(condition))                                          \
      ::base::CheckFailed(__FILE__, __LINE__, #condition);     \
  } while (0)

#endif  // BASE_CHECK_H_
