#include "lib/shape.h"
namespace lib {
namespace {
struct TriangleImpl final : Shape {
  int Sides() const override { return 3; }
};
TriangleImpl g_triangle;
}  // namespace
const Shape& Triangle() { return g_triangle; }
}  // namespace lib
