/* FNV-1a hashes, implemented in C. */

#ifndef BASE_HASH_FNV1A_H_
#define BASE_HASH_FNV1A_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* base_fnv1a32("a", 1) == 0xE40C292C. */
uint32_t base_fnv1a32(const void* data, size_t size);

/* base_fnv1a64("a", 1) == 0xAF63DC4C8601EC8C. */
uint64_t base_fnv1a64(const void* data, size_t size);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif /* BASE_HASH_FNV1A_H_ */
