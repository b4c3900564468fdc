#include <cstdio>
#include "lib/square.h"
int main() {
  if (lib::Square(2) != 4) return 1;
  std::puts("OK refused");
  return 0;
}
