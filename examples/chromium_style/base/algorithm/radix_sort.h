// LSD radix sort for 32-bit keys.

#ifndef BASE_ALGORITHM_RADIX_SORT_H_
#define BASE_ALGORITHM_RADIX_SORT_H_

#include <cstdint>
#include <vector>

namespace base {

void RadixSortU32(std::vector<uint32_t>* values);

}  // namespace base

#endif  // BASE_ALGORITHM_RADIX_SORT_H_
