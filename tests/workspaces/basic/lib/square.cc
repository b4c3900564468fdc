#include "lib/square.h"
namespace lib {
int Square(int x) { return x * x; }
int Cube(int x) { return Square(x) * x; }
}  // namespace lib
