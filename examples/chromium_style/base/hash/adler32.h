/* Adler-32 checksum (RFC 1950), implemented in C. */

#ifndef BASE_HASH_ADLER32_H_
#define BASE_HASH_ADLER32_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Start with adler == 1; base_adler32(1, "Wikipedia", 9) == 0x11E60398. */
uint32_t base_adler32(uint32_t adler, const uint8_t* data, size_t size);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif /* BASE_HASH_ADLER32_H_ */
