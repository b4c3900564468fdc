// Clamping helpers, defined out of line so that ThinLTO has to import them
// into the many hot loops that call them.

#ifndef BASE_NUMERICS_CLAMP_H_
#define BASE_NUMERICS_CLAMP_H_

#include <cstdint>

namespace base {

int Clamp(int value, int lo, int hi);
int64_t Clamp64(int64_t value, int64_t lo, int64_t hi);

}  // namespace base

#endif  // BASE_NUMERICS_CLAMP_H_
