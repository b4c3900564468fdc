#include <cstdio>
#include "lib/square.h"
int main() {
  if (lib::Cube(3) != 27) return 1;
  std::puts("OK app_unittests");
  return 0;
}
