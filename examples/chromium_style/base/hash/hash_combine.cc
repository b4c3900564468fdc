// Out-of-line hash mixing.

#include "base/hash/hash_combine.h"

namespace base {

uint64_t HashCombine(uint64_t seed, uint64_t value) {
  return seed ^ (value + 0x9e3779b97f4a7c15ull + (seed << 6) + (seed >> 2));
}

}  // namespace base
