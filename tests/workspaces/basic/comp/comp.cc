#include "lib/square.h"
__attribute__((visibility("default"))) int CompCube(int x) { return lib::Cube(x); }
