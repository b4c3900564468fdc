#include <cstdio>
#include "lib/shape.h"
#include "lib/square.h"
int RegTwice(int x);
int SsPlusOne(int x);
int CompCube(int x);
int main() {
  // lib::Square is defined in lib/square.cc: ThinLTO imports and inlines it.
  int v = lib::Square(7) + RegTwice(3) + SsPlusOne(1) + CompCube(2) + asm_answer();
  if (v != 49 + 6 + 2 + 8 + 42) return 1;
  if (lib::Triangle().Sides() != 3) return 1;
  std::puts("OK app");
  return 0;
}
