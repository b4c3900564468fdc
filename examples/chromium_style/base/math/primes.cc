// Sieve of Eratosthenes and trial division.

#include "base/math/primes.h"

#include <cstddef>

namespace base {

std::vector<uint32_t> PrimesUpTo(uint32_t limit) {
  std::vector<bool> composite(static_cast<size_t>(limit) + 1, false);
  std::vector<uint32_t> primes;
  for (uint64_t n = 2; n <= limit; ++n) {
    if (composite[n])
      continue;
    primes.push_back(static_cast<uint32_t>(n));
    for (uint64_t multiple = n * n; multiple <= limit; multiple += n)
      composite[multiple] = true;
  }
  return primes;
}

bool IsPrimeByTrialDivision(uint32_t n) {
  if (n < 2)
    return false;
  for (uint64_t d = 2; d * d <= n; ++d) {
    if (n % d == 0)
      return false;
  }
  return true;
}

}  // namespace base
