// Integer square root.

#ifndef BASE_MATH_ISQRT_H_
#define BASE_MATH_ISQRT_H_

#include <cstdint>

namespace base {

// floor(sqrt(n)), exact for all 64-bit n.
uint64_t ISqrt(uint64_t n);

}  // namespace base

#endif  // BASE_MATH_ISQRT_H_
