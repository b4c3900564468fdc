// Euclid's algorithm.

#include "base/math/gcd.h"

namespace base {

int64_t Gcd(int64_t a, int64_t b) {
  uint64_t x = a < 0 ? 0 - static_cast<uint64_t>(a) : static_cast<uint64_t>(a);
  uint64_t y = b < 0 ? 0 - static_cast<uint64_t>(b) : static_cast<uint64_t>(b);
  while (y != 0) {
    const uint64_t t = x % y;
    x = y;
    y = t;
  }
  return static_cast<int64_t>(x);
}

int64_t Lcm(int64_t a, int64_t b) {
  if (a == 0 || b == 0)
    return 0;
  const int64_t g = Gcd(a, b);
  const int64_t result = (a / g) * b;
  return result < 0 ? -result : result;
}

}  // namespace base
