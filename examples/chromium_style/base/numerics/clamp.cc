// Out-of-line clamp helpers (cross-module import targets).

#include "base/numerics/clamp.h"

namespace base {

int Clamp(int value, int lo, int hi) {
  return value < lo ? lo : (value > hi ? hi : value);
}

int64_t Clamp64(int64_t value, int64_t lo, int64_t hi) {
  return value < lo ? lo : (value > hi ? hi : value);
}

}  // namespace base
