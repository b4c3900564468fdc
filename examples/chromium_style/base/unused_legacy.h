/* Legacy C helper that no binary in the example calls (a lazy archive
 * member of libbase.a). */

#ifndef BASE_UNUSED_LEGACY_H_
#define BASE_UNUSED_LEGACY_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

unsigned base_unused_legacy_sum(const unsigned char* data, size_t size);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif /* BASE_UNUSED_LEGACY_H_ */
