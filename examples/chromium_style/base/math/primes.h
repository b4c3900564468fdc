// Prime sieve.

#ifndef BASE_MATH_PRIMES_H_
#define BASE_MATH_PRIMES_H_

#include <cstdint>
#include <vector>

namespace base {

// All primes <= |limit| (sieve of Eratosthenes).
std::vector<uint32_t> PrimesUpTo(uint32_t limit);

// Trial division; an independent check of PrimesUpTo().
bool IsPrimeByTrialDivision(uint32_t n);

}  // namespace base

#endif  // BASE_MATH_PRIMES_H_
