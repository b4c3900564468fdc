#include <cstdio>
#include "lib/square.h"
int main() {
  if (lib::Square(5) != 25) return 1;
  std::puts("OK tool");
  return 0;
}
