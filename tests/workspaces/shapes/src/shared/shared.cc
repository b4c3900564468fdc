#include "src/lib/lib.h"
extern "C" __attribute__((visibility("default"))) int shared_square_plus(int x) { return lib::Square(x) + 1; }
