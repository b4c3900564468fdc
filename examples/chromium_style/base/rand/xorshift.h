// Deterministic xorshift32 generator (Marsaglia 2003, shifts 13/17/5).

#ifndef BASE_RAND_XORSHIFT_H_
#define BASE_RAND_XORSHIFT_H_

#include <cstdint>

namespace base {

class XorShift32 {
 public:
  // |seed| must be non-zero; zero is replaced by 2463534242.
  explicit XorShift32(uint32_t seed);

  // Out of line: called from hot loops in many translation units.
  uint32_t Next();

  // Next() % bound (slightly biased; fine for test data).
  uint32_t NextBelow(uint32_t bound);

 private:
  uint32_t state_;
};

}  // namespace base

#endif  // BASE_RAND_XORSHIFT_H_
