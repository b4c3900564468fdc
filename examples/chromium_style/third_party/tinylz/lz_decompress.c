/* Bounds-checked LZ77 decompressor. */

#include <string.h>

#include "third_party/tinylz/tinylz.h"

long tinylz_decompress(const uint8_t* in, size_t size, uint8_t* out,
                       size_t capacity) {
  size_t ip = 0;
  size_t op = 0;
  while (ip < size) {
    const uint8_t token = in[ip++];
    if ((token & 0x80) == 0) {
      const size_t run = (size_t)token + 1;
      if (ip + run > size || op + run > capacity)
        return -1;
      memcpy(out + op, in + ip, run);
      ip += run;
      op += run;
      continue;
    }
    if (ip + 2 > size)
      return -1;
    const size_t length = (size_t)(token & 0x7F) + TINYLZ_MIN_MATCH;
    const size_t offset = (size_t)in[ip] | ((size_t)in[ip + 1] << 8);
    ip += 2;
    if (offset == 0 || offset > op || op + length > capacity)
      return -1;
    /* Byte by byte: source and destination may overlap. */
    for (size_t k = 0; k < length; ++k, ++op)
      out[op] = out[op - offset];
  }
  return (long)op;
}
