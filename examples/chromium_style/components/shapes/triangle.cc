// Triangle: params = {a, b, c} side lengths; area by Heron's formula.

#include <cmath>
#include <memory>
#include <vector>

#include "components/shapes/shape.h"
#include "components/shapes/shape_registry.h"

namespace shapes {
namespace {

class Triangle : public Shape {
 public:
  Triangle(double a, double b, double c) : a_(a), b_(b), c_(c) {}

  const char* kind() const override { return "triangle"; }
  double Area() const override {
    const double s = Perimeter() / 2.0;
    return std::sqrt(s * (s - a_) * (s - b_) * (s - c_));
  }
  double Perimeter() const override { return a_ + b_ + c_; }

 private:
  double a_;
  double b_;
  double c_;
};

std::unique_ptr<Shape> CreateTriangle(const std::vector<double>& params) {
  if (params.size() != 3)
    return nullptr;
  const double a = params[0], b = params[1], c = params[2];
  if (!(a > 0 && b > 0 && c > 0 && a + b > c && b + c > a && a + c > b))
    return nullptr;
  return std::make_unique<Triangle>(a, b, c);
}

const ShapeRegistrar g_triangle_registrar("triangle", &CreateTriangle);

}  // namespace
}  // namespace shapes
