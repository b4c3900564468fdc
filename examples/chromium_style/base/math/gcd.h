// Greatest common divisor and least common multiple.

#ifndef BASE_MATH_GCD_H_
#define BASE_MATH_GCD_H_

#include <cstdint>

namespace base {

// Gcd of the magnitudes; Gcd(0, 0) == 0.
int64_t Gcd(int64_t a, int64_t b);
int64_t Lcm(int64_t a, int64_t b);

}  // namespace base

#endif  // BASE_MATH_GCD_H_
