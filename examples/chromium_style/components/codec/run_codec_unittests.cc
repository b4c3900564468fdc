// main() of codec_unittests.

#include "base/test/test.h"

namespace {

// One per TEST() in the files listed in codec_unittests.
constexpr int kExpectedTestCount = 10;

}  // namespace

int main() {
  return base::test::RunAllTests("codec_unittests", kExpectedTestCount);
}
