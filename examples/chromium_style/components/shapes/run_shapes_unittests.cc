// main() of shapes_unittests.

#include "base/test/test.h"

namespace {

// One per TEST() in the files listed in shapes_unittests.
constexpr int kExpectedTestCount = 7;

}  // namespace

int main() {
  return base::test::RunAllTests("shapes_unittests", kExpectedTestCount);
}
