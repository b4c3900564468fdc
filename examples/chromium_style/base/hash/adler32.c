/* Adler-32 checksum. */

#include "base/hash/adler32.h"

enum { kAdlerModulus = 65521 };

uint32_t base_adler32(uint32_t adler, const uint8_t* data, size_t size) {
  uint32_t a = adler & 0xFFFFu;
  uint32_t b = adler >> 16;
  for (size_t i = 0; i < size; ++i) {
    a = (a + data[i]) % kAdlerModulus;
    b = (b + a) % kAdlerModulus;
  }
  return (b << 16) | a;
}
