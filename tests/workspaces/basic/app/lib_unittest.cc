#include <cstdio>
#include "lib/shape.h"
#include "lib/square.h"
int main() {
  if (lib::Square(4) != 16 || lib::Triangle().Sides() != 3) return 1;
  std::puts("OK lib_unittests");
  return 0;
}
