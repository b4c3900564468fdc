// The registry is filled by static initialisers in four other objects.

#include <string>
#include <vector>

#include "base/strings/string_util.h"
#include "base/test/test.h"
#include "components/shapes/shape_registry.h"

namespace {

TEST(ShapeRegistryTest, AllKindsRegistered) {
  const std::vector<std::string> kinds = shapes::RegisteredShapeKinds();
  EXPECT_EQ(base::JoinStrings(kinds, ","), "circle,polygon,rectangle,triangle");
}

TEST(ShapeRegistryTest, RejectsBadInput) {
  EXPECT_TRUE(shapes::CreateShape("ellipse", {1.0, 2.0}) == nullptr);
  EXPECT_TRUE(shapes::CreateShape("circle", {-1.0}) == nullptr);
  EXPECT_TRUE(shapes::CreateShape("triangle", {1.0, 1.0, 3.0}) == nullptr);
  EXPECT_TRUE(shapes::CreateShape("polygon", {2.0, 1.0}) == nullptr);
  EXPECT_TRUE(shapes::CreateShape("polygon", {5.5, 1.0}) == nullptr);
}

}  // namespace
