// Integer square root by bitwise digit-by-digit computation.

#include "base/math/isqrt.h"

namespace base {

uint64_t ISqrt(uint64_t n) {
  uint64_t result = 0;
  uint64_t bit = uint64_t{1} << 62;
  while (bit > n)
    bit >>= 2;
  while (bit != 0) {
    if (n >= result + bit) {
      n -= result + bit;
      result = (result >> 1) + bit;
    } else {
      result >>= 1;
    }
    bit >>= 2;
  }
  return result;
}

}  // namespace base
