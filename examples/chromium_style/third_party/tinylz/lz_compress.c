/* Greedy LZ77 compressor with a single-entry hash table. */

#include <string.h>

#include "third_party/tinylz/tinylz.h"

size_t tinylz_max_compressed_size(size_t size) {
  return size + size / TINYLZ_MAX_LITERALS + 1;
}

/* Emits literals [start, end) as runs; returns the new output position or
 * (size_t)-1 on overflow. */
static size_t emit_literals(const uint8_t* start, const uint8_t* end,
                            uint8_t* out, size_t pos, size_t capacity) {
  while (start < end) {
    size_t run = (size_t)(end - start);
    if (run > TINYLZ_MAX_LITERALS)
      run = TINYLZ_MAX_LITERALS;
    if (pos + 1 + run > capacity)
      return (size_t)-1;
    out[pos++] = (uint8_t)(run - 1);
    memcpy(out + pos, start, run);
    pos += run;
    start += run;
  }
  return pos;
}

size_t tinylz_compress(const uint8_t* in, size_t size, uint8_t* out,
                       size_t capacity) {
  /* Positions + 1, so that 0 means "empty". */
  uint32_t table[1 << TINYLZ_HASH_BITS];
  memset(table, 0, sizeof(table));

  size_t pos = 0;
  size_t i = 0;
  size_t literal_start = 0;
  while (i + TINYLZ_MIN_MATCH <= size) {
    const uint32_t h = tinylz_hash3(in + i);
    const size_t candidate = table[h];
    table[h] = (uint32_t)(i + 1);
    size_t length = 0;
    if (candidate != 0 && i - (candidate - 1) <= TINYLZ_MAX_OFFSET) {
      const size_t from = candidate - 1;
      while (i + length < size && length < TINYLZ_MAX_MATCH &&
             in[from + length] == in[i + length]) {
        ++length;
      }
    }
    if (length < TINYLZ_MIN_MATCH) {
      ++i;
      continue;
    }
    pos = emit_literals(in + literal_start, in + i, out, pos, capacity);
    if (pos == (size_t)-1 || pos + 3 > capacity)
      return 0;
    const size_t offset = i - (candidate - 1);
    out[pos++] = (uint8_t)(0x80 | (length - TINYLZ_MIN_MATCH));
    out[pos++] = (uint8_t)(offset & 0xFF);
    out[pos++] = (uint8_t)(offset >> 8);
    i += length;
    literal_start = i;
  }
  pos = emit_literals(in + literal_start, in + size, out, pos, capacity);
  return pos == (size_t)-1 ? 0 : pos;
}
