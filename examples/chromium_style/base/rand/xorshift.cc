// xorshift32.

#include "base/rand/xorshift.h"

namespace base {

XorShift32::XorShift32(uint32_t seed) : state_(seed ? seed : 2463534242u) {}

uint32_t XorShift32::Next() {
  uint32_t x = state_;
  x ^= x << 13;
  x ^= x >> 17;
  x ^= x << 5;
  state_ = x;
  return x;
}

uint32_t XorShift32::NextBelow(uint32_t bound) {
  return Next() % bound;
}

}  // namespace base
