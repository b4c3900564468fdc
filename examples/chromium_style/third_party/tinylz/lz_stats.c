/* Byte histogram. No executable in the example calls it, so its object is a
 * lazy member of libtinylz.a in those links. */

#include <string.h>

#include "third_party/tinylz/tinylz.h"

void tinylz_histogram(const uint8_t* data, size_t size, uint32_t counts[256]) {
  memset(counts, 0, 256 * sizeof(counts[0]));
  for (size_t i = 0; i < size; ++i)
    ++counts[data[i]];
}
