// Tests for base::Arena.

#include <cstdint>

#include "base/memory/arena.h"
#include "base/test/test.h"

namespace {

struct Point {
  int64_t x;
  int64_t y;
};

TEST(ArenaTest, AlignmentAndBlocks) {
  base::Arena arena(256);
  bool aligned = true;
  int64_t sum = 0;
  for (int i = 0; i < 100; ++i) {
    arena.Allocate(3, 1);
    Point* p = arena.New<Point>(Point{i, 2 * i});
    aligned = aligned && reinterpret_cast<uintptr_t>(p) % alignof(Point) == 0;
    sum += p->x + p->y;
  }
  EXPECT_TRUE(aligned);
  EXPECT_EQ(sum, int64_t{3 * 4950});
  EXPECT_EQ(arena.bytes_allocated(), 100u * (3 + sizeof(Point)));
  EXPECT_TRUE(arena.block_count() > 1);
}

}  // namespace
