// LSD radix sort, one byte per pass.

#include "base/algorithm/radix_sort.h"

#include <cstddef>

namespace base {

void RadixSortU32(std::vector<uint32_t>* values) {
  std::vector<uint32_t> scratch(values->size());
  for (int shift = 0; shift < 32; shift += 8) {
    size_t counts[257] = {};
    for (uint32_t v : *values)
      ++counts[((v >> shift) & 0xFF) + 1];
    for (int i = 0; i < 256; ++i)
      counts[i + 1] += counts[i];
    for (uint32_t v : *values)
      scratch[counts[(v >> shift) & 0xFF]++] = v;
    values->swap(scratch);
  }
}

}  // namespace base
