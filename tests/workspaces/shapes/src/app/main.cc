// Checks every part of the program and prints "OK app", or what went wrong with exit 1.
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "src/lib/lib.h"

namespace ss {
int RectArea(int w, int h);
}
extern "C" int shared_square_plus(int x);

int main() {
  char path[4096];
  ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 32);
  if (n <= 0) return 1;
  path[n] = 0;
  strcpy(strrchr(path, '/') + 1, "libplugin.so");
  void* plugin = dlopen(path, RTLD_NOW);
  if (!plugin) {
    printf("FAIL dlopen %s: %s\n", path, dlerror());
    return 1;
  }
  auto plugin_value = reinterpret_cast<int (*)()>(dlsym(plugin, "plugin_value"));
  int got[] = {lib::Square(7), ss::RectArea(3, 4), shared_square_plus(3), plugin_value ? plugin_value() : -1};
  int want[] = {49, 12, 10, 25};
  for (int i = 0; i < 4; ++i) {
    if (got[i] != want[i]) {
      printf("FAIL check %d: %d != %d\n", i, got[i], want[i]);
      return 1;
    }
  }
  printf("OK app\n");
  return 0;
}
