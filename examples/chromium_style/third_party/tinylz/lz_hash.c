/* Match-finder hash. */

#include "third_party/tinylz/tinylz.h"

uint32_t tinylz_hash3(const uint8_t* p) {
  const uint32_t v = (uint32_t)p[0] | ((uint32_t)p[1] << 8) |
                     ((uint32_t)p[2] << 16);
  return (v * 2654435761u) >> (32 - TINYLZ_HASH_BITS);
}
