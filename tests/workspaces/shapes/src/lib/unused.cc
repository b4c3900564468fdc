#include "src/lib/lib.h"
namespace lib {
// Nothing calls this: its archive member stays lazy and unextracted.
int Unused(int x) { return x - 42; }
}  // namespace lib
