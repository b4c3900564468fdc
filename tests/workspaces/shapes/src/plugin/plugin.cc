#include "src/lib/lib.h"
extern "C" __attribute__((visibility("default"))) int plugin_value() { return lib::Square(5); }
