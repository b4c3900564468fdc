// main() of calc_unittests.

#include "base/test/test.h"

namespace {

// One per TEST() in the files listed in calc_unittests.
constexpr int kExpectedTestCount = 7;

}  // namespace

int main() {
  return base::test::RunAllTests("calc_unittests", kExpectedTestCount);
}
