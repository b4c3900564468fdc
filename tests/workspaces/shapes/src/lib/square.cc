#include "src/lib/lib.h"
namespace lib {
int Square(int x) { return asm_ident(x) * x; }
}  // namespace lib
