#include "lib/square.h"
namespace lib {
const char* Unused() { return "unused lazy member"; }
}  // namespace lib
