/* Never referenced: stays a lazy member of libbase.a in executable links. */

#include "base/unused_legacy.h"

unsigned base_unused_legacy_sum(const unsigned char* data, size_t size) {
  unsigned sum = 0;
  for (size_t i = 0; i < size; ++i)
    sum = sum * 31u + data[i];
  return sum;
}
