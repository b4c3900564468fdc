// main() of base_unittests.

#include "base/test/test.h"

namespace {

// One per TEST() in the files listed in base/BUILD.gn's base_unittests.
constexpr int kExpectedTestCount = 31;

}  // namespace

int main() {
  return base::test::RunAllTests("base_unittests", kExpectedTestCount);
}
