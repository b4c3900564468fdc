// Out-of-line definition of the ThinLTO import probe; keep it tiny.

#include "base/inline_probe.h"

namespace base {

int ImportMeInline(int x) {
  return x * 3 + 1;
}

}  // namespace base
