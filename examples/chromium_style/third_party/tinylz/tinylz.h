/* tinylz: a tiny LZ77 compressor in C (stand-in for a third_party library).
 *
 * Stream format, a sequence of tokens:
 *   0xxxxxxx                 literal run: the next (x + 1) bytes are copied
 *   1xxxxxxx lo hi           match: copy (x + 3) bytes from (hi << 8 | lo)
 *                            bytes back in the output (offset >= 1)
 */

#ifndef THIRD_PARTY_TINYLZ_TINYLZ_H_
#define THIRD_PARTY_TINYLZ_TINYLZ_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum {
  TINYLZ_MIN_MATCH = 3,
  TINYLZ_MAX_MATCH = 130,
  TINYLZ_MAX_LITERALS = 128,
  TINYLZ_MAX_OFFSET = 65535,
  TINYLZ_HASH_BITS = 12,
};

/* Worst-case output size for |size| input bytes. */
size_t tinylz_max_compressed_size(size_t size);

/* Returns the compressed size, or 0 if |capacity| is too small (an empty
 * input compresses to 0 bytes). */
size_t tinylz_compress(const uint8_t* in, size_t size, uint8_t* out,
                       size_t capacity);

/* Returns the decompressed size, or -1 for malformed input or overflow. */
long tinylz_decompress(const uint8_t* in, size_t size, uint8_t* out,
                       size_t capacity);

/* Hash of the 3 bytes at |p|, in [0, 1 << TINYLZ_HASH_BITS). */
uint32_t tinylz_hash3(const uint8_t* p);

/* Byte histogram of |data| (not used by the example's executables). */
void tinylz_histogram(const uint8_t* data, size_t size, uint32_t counts[256]);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif /* THIRD_PARTY_TINYLZ_TINYLZ_H_ */
