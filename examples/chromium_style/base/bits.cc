// Portable bit manipulation.

#include "base/bits.h"

namespace base {
namespace bits {

int PopCount64(uint64_t value) {
  int count = 0;
  while (value != 0) {
    value &= value - 1;
    ++count;
  }
  return count;
}

uint32_t ReverseBits32(uint32_t value) {
  uint32_t result = 0;
  for (int i = 0; i < 32; ++i) {
    result = (result << 1) | (value & 1u);
    value >>= 1;
  }
  return result;
}

}  // namespace bits
}  // namespace base
