/* Portable base_mix64() for targets other than x86-64 (see base/BUILD.gn). */

#include "base/cpu/mix64.h"

uint64_t base_mix64(uint64_t z) {
  return base_mix64_reference(z);
}
