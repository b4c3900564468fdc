// Boost-style hash mixing, defined out of line (a cross-module import target).

#ifndef BASE_HASH_HASH_COMBINE_H_
#define BASE_HASH_HASH_COMBINE_H_

#include <cstdint>

namespace base {

// seed ^ (value + 0x9e3779b97f4a7c15 + (seed << 6) + (seed >> 2)).
uint64_t HashCombine(uint64_t seed, uint64_t value);

}  // namespace base

#endif  // BASE_HASH_HASH_COMBINE_H_
