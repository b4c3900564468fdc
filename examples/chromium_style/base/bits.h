// Bit manipulation helpers.

#ifndef BASE_BITS_H_
#define BASE_BITS_H_

#include <cstdint>

namespace base {
namespace bits {

// Header-inline helpers.
constexpr bool IsPowerOfTwo(uint64_t value) {
  return value != 0 && (value & (value - 1)) == 0;
}

constexpr uint64_t AlignUp(uint64_t value, uint64_t alignment) {
  return (value + alignment - 1) & ~(alignment - 1);
}

// Out-of-line, portable (no builtins), so it can be checked against
// __builtin_popcountll.
int PopCount64(uint64_t value);

// Reverses the bit order of a 32-bit value.
uint32_t ReverseBits32(uint32_t value);

}  // namespace bits
}  // namespace base

#endif  // BASE_BITS_H_
