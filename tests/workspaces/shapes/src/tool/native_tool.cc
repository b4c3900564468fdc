#include <stdio.h>
int main() {
  printf("OK native_tool\n");
  return 0;
}
