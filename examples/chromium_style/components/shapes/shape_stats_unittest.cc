// Tests for shapes::Summarize().

#include <memory>
#include <vector>

#include "base/test/test.h"
#include "components/shapes/shape_registry.h"
#include "components/shapes/shape_stats.h"

namespace {

TEST(ShapeStatsTest, FourShapes) {
  std::vector<std::unique_ptr<shapes::Shape>> list;
  list.push_back(shapes::CreateShape("circle", {1.0}));
  list.push_back(shapes::CreateShape("rectangle", {3.0, 4.0}));
  list.push_back(shapes::CreateShape("triangle", {3.0, 4.0, 5.0}));
  list.push_back(shapes::CreateShape("polygon", {6.0, 2.0}));
  const shapes::ShapeStats stats = shapes::Summarize(list);
  EXPECT_EQ(stats.count, 4);
  EXPECT_NEAR(stats.total_area, 31.533897499003057, 1e-9);
  EXPECT_NEAR(stats.total_perimeter, 44.283185307179586, 1e-9);
  // HashCombine fold of milli-areas 3142, 12000, 6000, 10392.
  EXPECT_EQ(stats.fingerprint, 0x4867EDCB92D9F092ull);
}

}  // namespace
