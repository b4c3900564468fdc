// Tests for base::Clamp().

#include <cstdint>
#include <limits>

#include "base/numerics/clamp.h"
#include "base/test/test.h"

namespace {

TEST(ClampTest, Bounds) {
  EXPECT_EQ(base::Clamp(5, 0, 10), 5);
  EXPECT_EQ(base::Clamp(-5, 0, 10), 0);
  EXPECT_EQ(base::Clamp(50, 0, 10), 10);
  EXPECT_EQ(base::Clamp64(std::numeric_limits<int64_t>::min(), -1, 1),
            int64_t{-1});
}

TEST(ClampTest, HotLoop) {
  // Sum of clamp(i, 100, 900) for i in [0, 1000).
  int64_t sum = 0;
  for (int i = 0; i < 1000; ++i)
    sum += base::Clamp(i, 100, 900);
  EXPECT_EQ(sum, int64_t{499600});
}

}  // namespace
