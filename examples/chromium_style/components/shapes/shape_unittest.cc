// Area and perimeter of each shape kind, through the Shape interface.

#include <memory>
#include <vector>

#include "base/test/test.h"
#include "components/shapes/shape.h"
#include "components/shapes/shape_registry.h"

namespace {

constexpr double kTolerance = 1e-9;

TEST(ShapeTest, Circle) {
  auto circle = shapes::CreateShape("circle", {1.0});
  EXPECT_TRUE(circle != nullptr);
  EXPECT_NEAR(circle->Area(), 3.141592653589793, kTolerance);
  EXPECT_NEAR(circle->Perimeter(), 6.283185307179586, kTolerance);
}

TEST(ShapeTest, Rectangle) {
  auto rectangle = shapes::CreateShape("rectangle", {3.0, 4.0});
  EXPECT_NEAR(rectangle->Area(), 12.0, kTolerance);
  EXPECT_NEAR(rectangle->Perimeter(), 14.0, kTolerance);
  EXPECT_EQ(rectangle->Describe(), "rectangle area=12.000 perimeter=14.000");
}

TEST(ShapeTest, Triangle) {
  auto triangle = shapes::CreateShape("triangle", {3.0, 4.0, 5.0});
  EXPECT_NEAR(triangle->Area(), 6.0, kTolerance);
  EXPECT_NEAR(triangle->Perimeter(), 12.0, kTolerance);
}

TEST(ShapeTest, Hexagon) {
  auto hexagon = shapes::CreateShape("polygon", {6.0, 2.0});
  EXPECT_NEAR(hexagon->Area(), 10.392304845413264, kTolerance);  // 6*sqrt(3)
  EXPECT_EQ(hexagon->Describe(), "polygon area=10.392 perimeter=12.000");
}

}  // namespace
